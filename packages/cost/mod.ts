/**
 * `@libra/cost`: (not built yet; see the issues).
 *
 * @module
 */

export {};
