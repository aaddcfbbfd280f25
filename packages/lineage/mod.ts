/**
 * `@libra/lineage`: (not built yet; see the issues).
 *
 * @module
 */

export {};
