/** Dashboard (not built yet). @module */
export {};
