// Regenerates docs/configuration.md from the schema (src/config/docs.ts): types, descriptions,
// defaults and what is required all come from the schema the gateway validates with.
import { writeFileSync } from "node:fs";
import { configReference } from "../dist/config/docs.js";
import { jsonSchema } from "../dist/config/schema.js";

const file = new URL("../docs/configuration.md", import.meta.url);
writeFileSync(file, configReference(jsonSchema()));
console.log(`wrote ${file.pathname}`);
