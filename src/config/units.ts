// The config's unit-bearing scalars: the parsers live below limits/ (the algorithms read and write
// the same forms), re-exported for the config's own modules.
export * from "../limits/notation.js";
