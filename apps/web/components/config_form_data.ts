/**
 * Turns the configuration form's string fields into the API's configuration shape and
 * validates them. This module runs in the browser (the form island), so it must not
 * import the API's schema module, which loads the model zoo and the planners (and
 * with them a WebAssembly solver): it carries {@link FIELD_RULES}, the field rules of
 * the API's `ConfigurationInput`, and checks names against the server's lists given
 * as props. The server validates with the API's own schema (`config_form_server.ts`);
 * a test checks that the two agree.
 *
 * @module
 */

import { z } from "zod";

/** A configuration as the API takes it (`ConfigurationInput` of `@libra/api/schemas`). */
export interface ConfigurationInput {
  name: string;
  model: string;
  preset: string;
  config: Record<string, unknown> | null;
  device: "cpu" | "cuda";
  budgetRatio: number | null;
  budgetBytes: number | null;
  policy: string;
  costModel: string;
  steps: number;
  seed: number;
  overheadLimit: number;
}

/** `unknown <what> "x"; choose one of a, b, c` (the API's wording, `unknownName` of its catalog). */
export function unknownName(what: string, value: string, valid: readonly string[]): string {
  return `unknown ${what} ${JSON.stringify(value)}; choose one of ${valid.join(", ")}`;
}

/** One field error. */
export interface FieldError {
  /** The form field. */
  field: string;
  /** Why it was rejected. */
  reason: string;
}

/** Field errors of a zod error. */
export function fieldErrors(error: z.ZodError): FieldError[] {
  return error.issues.map((i) => ({
    field: i.path.map(String).join(".") || "body",
    reason: i.message,
  }));
}

const name = z.string().regex(
  /^[a-z0-9][a-z0-9._-]{0,63}$/,
  "lower-case letters, digits, '.', '_' or '-', starting with a letter or digit",
);

const policyName = z.string().regex(
  /^[a-z0-9][a-z0-9._-]{0,63}(\+swap)?$/,
  `lower-case letters, digits, '.', '_' or '-', starting with a letter or digit, optionally followed by "+swap"`,
);
// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** The field rules of the API's configuration, for validating in the browser. */
export const FIELD_RULES: z.ZodType<ConfigurationInput> = z.object({
  name: z.string().max(100, "at most 100 characters").refine(
    (s) => !CONTROL.test(s),
    "must not contain control characters (NUL, newlines, escapes)",
  ).pipe(z.string().trim().min(1, "must not be empty")),
  model: name,
  preset: name,
  config: z.null(),
  device: z.enum(["cpu", "cuda"]),
  budgetRatio: z.number().gt(0, "must be > 0").lte(1, "must be <= 1").nullable(),
  budgetBytes: z.number().int("must be an integer").positive("must be > 0").nullable(),
  policy: policyName,
  costModel: name,
  steps: z.number().int("must be an integer").min(1, "must be >= 1").max(
    10_000,
    "must be <= 10000",
  ),
  seed: z.number().int("must be an integer").min(0, "must be >= 0").max(
    2 ** 31 - 1,
    "must be < 2^31",
  ),
  overheadLimit: z.number().gt(1, "must be > 1").lte(1e6, "must be <= 1000000"),
}).superRefine((v, ctx) => {
  if ((v.budgetRatio === null) === (v.budgetBytes === null)) {
    ctx.addIssue({
      code: "custom",
      path: ["budgetRatio"],
      message: v.budgetRatio === null
        ? "give a budget: budgetRatio (0 < r <= 1) or budgetBytes"
        : "give budgetRatio or budgetBytes, not both",
    });
  }
});

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
    overheadLimit: String(c.overheadLimit),
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
  costModel: "analytic",
  // The API's DEFAULT_RUN_STEPS (this module cannot import it; a test checks they agree).
  steps: "41",
  seed: "0",
  overheadLimit: "2",
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
  if (presets) check("preset", v.preset, presets, `preset of ${v.model}`);
  check("policy", v.policy, c.policies, "policy");
  check("costModel", v.costModel, c.costModels, "cost model");
  return out;
}

/** The form's strings as the API's configuration fields (numbers parsed, text kept). */
export function formToRaw(v: ConfigFormValues): Record<string, unknown> {
  return {
    name: v.name ?? "",
    model: v.model ?? "",
    preset: v.preset || "tiny",
    config: null,
    device: v.device || "cpu",
    budgetRatio: toNumber(v.budgetRatio),
    budgetBytes: toNumber(v.budgetBytes),
    policy: v.policy ?? "",
    costModel: v.costModel || "analytic",
    steps: toNumber(v.steps) ?? Number(EMPTY_FORM.steps),
    seed: toNumber(v.seed) ?? 0,
    overheadLimit: toNumber(v.overheadLimit) ?? 2,
  };
}

/** Parses with `schema`, then checks the names against `choices`; errors name the fields. */
export function validateWith(
  schema: z.ZodType<ConfigurationInput>,
  v: ConfigFormValues,
  choices?: FormChoices,
): { ok: true; value: ConfigurationInput } | { ok: false; errors: FieldError[] } {
  const raw = formToRaw(v);
  const r = schema.safeParse(raw);
  const errors = r.success ? [] : fieldErrors(r.error);
  if (choices) {
    const names = raw as { model: string; preset: string; policy: string; costModel: string };
    for (const e of choiceErrors(names, choices)) {
      if (!errors.some((x) => x.field === e.field)) errors.push(e);
    }
  }
  return r.success && errors.length === 0 ? { ok: true, value: r.data } : { ok: false, errors };
}

/**
 * Validates the form in the browser with {@link FIELD_RULES} and the server's lists.
 * The server validates the same form with the API's schema (`config_form_server.ts`).
 */
export function parseConfigForm(
  v: ConfigFormValues,
  choices?: FormChoices,
): { ok: true; value: ConfigurationInput } | { ok: false; errors: FieldError[] } {
  return validateWith(FIELD_RULES, v, choices);
}
