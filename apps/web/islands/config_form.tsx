/**
 * Island: the configuration form. It posts to the server like a plain form (so it
 * works without JavaScript, where the server answers with the validation messages);
 * in the browser it validates each field as you type (or leave it) with the API's own
 * schema, and model, preset, policy and cost model are chosen from the server's lists.
 *
 * @module
 */

import { useSignal } from "@preact/signals";
import type { VNode } from "preact";
import { island } from "../components/island.tsx";
import {
  type ConfigFormValues,
  type FormChoices,
  parseConfigForm,
} from "../components/config_form_data.ts";

/** Props. */
export interface ConfigFormProps {
  /** Initial values. */
  values: ConfigFormValues;
  /** Server-side errors by field. */
  errors: Record<string, string>;
  /** The server's lists: models, presets per model, policies, cost models. */
  choices: FormChoices;
  /** Heading note, e.g. which configuration this form clones. */
  cloneOf?: string | null;
  /** Whether the visitor may write (else the form is disabled with a note). */
  canWrite: boolean;
}

function ConfigFormView(p: ConfigFormProps): VNode {
  const values = useSignal<ConfigFormValues>(p.values);
  const errors = useSignal<Record<string, string>>(p.errors);
  // fields the visitor has typed in or left: their errors show as they type
  const touched = useSignal<Set<string>>(new Set(Object.keys(p.errors)));
  const submitted = useSignal(false);
  const validate = (): boolean => {
    const r = parseConfigForm(values.value, p.choices);
    const all = r.ok ? {} : Object.fromEntries(r.errors.map((e) => [e.field, e.reason]));
    errors.value = submitted.value
      ? all
      : Object.fromEntries(Object.entries(all).filter(([k]) => touched.value.has(k)));
    return r.ok;
  };
  const touch = (k: string) => {
    if (!touched.value.has(k)) touched.value = new Set([...touched.value, k]);
  };
  const set = (k: string) => (e: Event) => {
    const v = (e.currentTarget as HTMLInputElement).value;
    const next = { ...values.value, [k]: v };
    // a new model keeps its preset only if the model has it
    if (k === "model") {
      const presets = p.choices.presets[v];
      if (presets?.length && !presets.includes(next.preset ?? "")) next.preset = presets[0]!;
    }
    values.value = next;
    touch(k);
    validate();
  };
  const leave = (k: string) => () => {
    touch(k);
    validate();
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
    <input
      name={k}
      value={values.value[k] ?? ""}
      onInput={set(k)}
      onBlur={leave(k)}
      {...extra}
    />
  );
  const choose = (k: string, options: readonly string[]) => {
    const current = values.value[k] ?? "";
    const list = options.includes(current) || current === "" ? options : [current, ...options];
    return (
      <select name={k} value={current} onChange={set(k)} onBlur={leave(k)}>
        {list.map((o) => <option key={o} value={o} selected={o === current}>{o}</option>)}
      </select>
    );
  };
  const model = values.value.model ?? "";
  const allPresets = [...new Set(Object.values(p.choices.presets).flat())];
  const presets = p.choices.presets[model] ?? (allPresets.length ? allPresets : ["tiny"]);
  return (
    <form
      method="post"
      action="/configurations"
      class="config-form"
      noValidate
      onSubmit={(e) => {
        submitted.value = true;
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
        {p.cloneOf && (
          <p class="notice" data-clone-of={p.cloneOf}>
            A copy of configuration {p.cloneOf}: edit what should differ, then create it.
          </p>
        )}
        <div class="grid">
          {field("name", "Name", text("name", { placeholder: "gpt tiny at half memory" }))}
          {field("model", "Model", choose("model", p.choices.models), "a model of the zoo")}
          {field("preset", "Preset", choose("preset", presets), `sizes of ${model || "the model"}`)}
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
          {field("policy", "Policy", choose("policy", p.choices.policies))}
          {field("costModel", "Cost model", choose("costModel", p.choices.costModels))}
          {field("steps", "Steps", text("steps", { inputMode: "numeric" }))}
          {field("seed", "Seed", text("seed", { inputMode: "numeric" }))}
          {field(
            "overheadLimit",
            "Thrash limit",
            text("overheadLimit", { inputMode: "decimal" }),
            "X > 1: the run stops as thrashing past overhead X (default 2)",
          )}
        </div>
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
