/** Lab API (not built yet). @module */
export {};
