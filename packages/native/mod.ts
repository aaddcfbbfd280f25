/**
 * `@libra/native`: (not built yet; see the issues).
 *
 * @module
 */

export {};
