/**
 * `@libra/runtime`: (not built yet; see the issues).
 *
 * @module
 */

export {};
