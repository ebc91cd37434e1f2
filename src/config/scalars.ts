// The config's unit-bearing zod scalars: defined below limits/ (each algorithm declares its keys
// with them), re-exported for the config's schema.
export * from "../limits/scalars.js";
