/**
 * Turns the configuration form's string fields into the API's configuration shape,
 * so that the server (no JavaScript) and the form island validate the same way.
 *
 * @module
 */

import { ConfigurationInput, type FieldError, fieldErrors } from "@libra/api/schemas";

/** The form's fields as strings. */
export type ConfigFormValues = Record<string, string>;

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

/** Parses and validates the form; errors name the form fields. */
export function parseConfigForm(
  v: ConfigFormValues,
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
  return r.success ? { ok: true, value: r.data } : { ok: false, errors: fieldErrors(r.error) };
}
