// Regenerates config/gateway.schema.json from the zod schema (src/config/schema.ts), so editors
// validate the YAML with the same rules the gateway does. test/unit/schema.test.ts fails when
// the committed file is stale.
import { writeFileSync } from "node:fs";
import { jsonSchema } from "../dist/config/schema.js";

const file = new URL("../config/gateway.schema.json", import.meta.url);
writeFileSync(file, `${JSON.stringify(jsonSchema(), null, 2)}\n`);
console.log(`wrote ${file.pathname}`);
