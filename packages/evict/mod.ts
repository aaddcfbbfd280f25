/**
 * `@libra/evict`: (not built yet; see the issues).
 *
 * @module
 */

export {};
