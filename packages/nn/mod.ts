/**
 * `@libra/nn`: (not built yet; see the issues).
 *
 * @module
 */

export {};
