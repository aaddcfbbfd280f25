/**
 * Turns the configuration form's string fields into the API's configuration shape,
 * so that the server (no JavaScript) and the form island validate the same way.
 *
 * @module
 */

import { unknownName } from "@libra/api/catalog";
import { ConfigurationInput, type FieldError, fieldErrors } from "@libra/api/schemas";

/** The form's fields as strings. */
export type ConfigFormValues = Record<string, string>;

/** The form's values for an existing configuration (to clone it). */
export function formValuesOf(c: ConfigurationInput, name = c.name): ConfigFormValues {
  return {
    name,
    model: c.model,
    preset: c.preset,
    device: c.device,
    budgetRatio: c.budgetRatio === null ? "" : String(c.budgetRatio),
    budgetBytes: c.budgetBytes === null ? "" : String(c.budgetBytes),
    policy: c.policy,
    costModel: c.costModel,
    steps: String(c.steps),
    seed: String(c.seed),
  };
}

/** Empty form. */
export const EMPTY_FORM: ConfigFormValues = {
  name: "",
  model: "gpt",
  preset: "tiny",
  device: "cpu",
  budgetRatio: "0.5",
  budgetBytes: "",
  policy: "dtr-eq",
  costModel: "measured",
  steps: "3",
  seed: "0",
};

function toNumber(v: string | undefined): number | null | string {
  if (v === undefined || v.trim() === "") return null;
  const n = Number(v);
  return Number.isFinite(n) ? n : v;
}

/** The server's lists the form's choices must come from. */
export interface FormChoices {
  /** Models. */
  models: string[];
  /** Presets per model (a model without an entry accepts any preset name). */
  presets: Record<string, string[]>;
  /** Policies and planners. */
  policies: string[];
  /** Cost models. */
  costModels: string[];
}

function choiceErrors(
  v: { model: string; preset: string; policy: string; costModel: string },
  c: FormChoices,
): FieldError[] {
  const out: FieldError[] = [];
  const check = (field: string, value: string, list: readonly string[], what: string) => {
    if (list.length && !list.includes(value)) {
      out.push({ field, reason: unknownName(what, value, list) });
    }
  };
  check("model", v.model, c.models, "model");
  const presets = c.presets[v.model];
  if (presets) check("preset", v.preset, presets, `preset for ${v.model}`);
  check("policy", v.policy, c.policies, "policy");
  check("costModel", v.costModel, c.costModels, "cost model");
  return out;
}

/**
 * Parses and validates the form; errors name the form fields. With `choices`, the
 * model, preset, policy and cost model must also be among the server's names.
 */
export function parseConfigForm(
  v: ConfigFormValues,
  choices?: FormChoices,
): { ok: true; value: ConfigurationInput } | { ok: false; errors: FieldError[] } {
  const raw: Record<string, unknown> = {
    name: v.name ?? "",
    model: v.model ?? "",
    preset: v.preset || "tiny",
    device: v.device || "cpu",
    budgetRatio: toNumber(v.budgetRatio),
    budgetBytes: toNumber(v.budgetBytes),
    policy: v.policy ?? "",
    costModel: v.costModel || "measured",
    steps: toNumber(v.steps) ?? 3,
    seed: toNumber(v.seed) ?? 0,
  };
  const r = ConfigurationInput.safeParse(raw);
  const errors = r.success ? [] : fieldErrors(r.error);
  if (choices) {
    const names = raw as { model: string; preset: string; policy: string; costModel: string };
    for (const e of choiceErrors(names, choices)) {
      if (!errors.some((x) => x.field === e.field)) errors.push(e);
    }
  }
  return r.success && errors.length === 0 ? { ok: true, value: r.data } : { ok: false, errors };
}
