/**
 * The configuration form validated on the server with the API's own schema
 * (`ConfigurationInput`, which also checks names against the packages), plus the
 * form's lists. Server only: the schema module loads the model zoo and the planners.
 *
 * @module
 */

import { ConfigurationInput } from "@libra/api/schemas";
import {
  type ConfigFormValues,
  type ConfigurationInput as FormConfiguration,
  type FieldError,
  type FormChoices,
  validateWith,
} from "./config_form_data.ts";

/** Parses and validates the form as the API would; errors name the form fields. */
export function parseConfigFormOnServer(
  v: ConfigFormValues,
  choices?: FormChoices,
): { ok: true; value: FormConfiguration } | { ok: false; errors: FieldError[] } {
  return validateWith(ConfigurationInput as never, v, choices);
}
