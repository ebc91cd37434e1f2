// Regenerates docs/configuration.md from the schema (src/config/docs.ts). The defaults column
// comes from what a minimal config compiles to, so it shows what the gateway really uses.
import { writeFileSync } from "node:fs";
import { configReference, MINIMAL_CONFIG } from "../dist/config/docs.js";
import { loadConfigText } from "../dist/config/load.js";
import { jsonSchema } from "../dist/config/schema.js";

const loaded = loadConfigText(MINIMAL_CONFIG, "minimal.yaml", {});
if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
const file = new URL("../docs/configuration.md", import.meta.url);
writeFileSync(file, configReference(jsonSchema(), loaded.config));
console.log(`wrote ${file.pathname}`);
