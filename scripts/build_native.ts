/** Placeholder until the native build lands: nothing to build yet. @module */
console.log("build:native: no native sources yet");
