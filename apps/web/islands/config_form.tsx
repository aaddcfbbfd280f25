/**
 * Island: the configuration form. It posts to the server like a plain form (so it
 * works without JavaScript, where the server answers with the validation messages);
 * in the browser it validates as you type with the API's own schema.
 *
 * @module
 */

import { useSignal } from "@preact/signals";
import type { VNode } from "preact";
import { island } from "../components/island.tsx";
import { type ConfigFormValues, parseConfigForm } from "../components/config_form_data.ts";

/** Props. */
export interface ConfigFormProps {
  /** Initial values. */
  values: ConfigFormValues;
  /** Server-side errors by field. */
  errors: Record<string, string>;
  /** Model names to suggest. */
  models: string[];
  /** Policy names to suggest. */
  policies: string[];
  /** Whether the visitor may write (else the form is disabled with a note). */
  canWrite: boolean;
}

function ConfigFormView(p: ConfigFormProps): VNode {
  const values = useSignal<ConfigFormValues>(p.values);
  const errors = useSignal<Record<string, string>>(p.errors);
  const touched = useSignal(false);
  const set = (k: string) => (e: Event) => {
    values.value = { ...values.value, [k]: (e.currentTarget as HTMLInputElement).value };
    if (touched.value) validate();
  };
  const validate = (): boolean => {
    const r = parseConfigForm(values.value);
    errors.value = r.ok ? {} : Object.fromEntries(r.errors.map((e) => [e.field, e.reason]));
    return r.ok;
  };
  const field = (k: string, label: string, input: VNode, hint?: string) => (
    <label class={errors.value[k] ? "field invalid" : "field"} data-field={k}>
      <span class="label">{label}</span>
      {input}
      {errors.value[k]
        ? <span class="error" role="alert">{errors.value[k]}</span>
        : hint
        ? <span class="hint">{hint}</span>
        : null}
    </label>
  );
  const text = (k: string, extra: Record<string, unknown> = {}) => (
    <input name={k} value={values.value[k] ?? ""} onInput={set(k)} {...extra} />
  );
  return (
    <form
      method="post"
      action="/configurations"
      class="config-form"
      noValidate
      onSubmit={(e) => {
        touched.value = true;
        if (!validate()) e.preventDefault();
      }}
    >
      <fieldset disabled={!p.canWrite}>
        {!p.canWrite && (
          <p class="notice">
            <a href="/login?next=/configurations">Log in</a>{" "}
            with the API token to create configurations.
          </p>
        )}
        <div class="grid">
          {field("name", "Name", text("name", { placeholder: "gpt tiny at half memory" }))}
          {field("model", "Model", text("model", { list: "models" }), "a model of the zoo")}
          {field("preset", "Preset", text("preset"))}
          {field(
            "device",
            "Device",
            <select name="device" value={values.value.device} onChange={set("device")}>
              <option value="cpu">cpu</option>
              <option value="cuda">cuda</option>
            </select>,
          )}
          {field(
            "budgetRatio",
            "Budget ratio",
            text("budgetRatio", { inputMode: "decimal" }),
            "0 < r ≤ 1 of the budget-free peak",
          )}
          {field(
            "budgetBytes",
            "…or budget bytes",
            text("budgetBytes", { inputMode: "numeric" }),
            "leave empty when a ratio is given",
          )}
          {field("policy", "Policy", text("policy", { list: "policies" }))}
          {field("costModel", "Cost model", text("costModel"))}
          {field("steps", "Steps", text("steps", { inputMode: "numeric" }))}
          {field("seed", "Seed", text("seed", { inputMode: "numeric" }))}
        </div>
        <datalist id="models">{p.models.map((m) => <option key={m} value={m} />)}</datalist>
        <datalist id="policies">{p.policies.map((m) => <option key={m} value={m} />)}</datalist>
        {errors.value.body && <p class="error" role="alert">{errors.value.body}</p>}
        <div class="actions">
          <button type="submit" name="launch" value="1" class="primary">
            Create and launch a run
          </button>
          <button type="submit">Create</button>
        </div>
      </fieldset>
    </form>
  );
}

/** The configuration form island. */
export const ConfigForm: (props: ConfigFormProps) => VNode = island("ConfigForm", ConfigFormView);
/** The component itself (for the client registry). */
export const component: typeof ConfigFormView = ConfigFormView;
