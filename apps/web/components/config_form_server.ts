/**
 * The configuration form validated on the server as the API validates a configuration
 * (`KnownConfigurationInput`: the schema plus the names the packages implement), plus
 * the form's lists. Server only: the catalog loads the model zoo and the planners.
 *
 * @module
 */

import { KnownConfigurationInput } from "@libra/api/catalog";
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
  return validateWith(KnownConfigurationInput as never, v, choices);
}
