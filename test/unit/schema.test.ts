import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { jsonSchema } from "../../src/config/schema.js";

describe("config/gateway.schema.json", () => {
  it("is generated from the current zod schema (run `npm run schema` after changing it)", () => {
    const committed = JSON.parse(
      readFileSync(new URL("../../config/gateway.schema.json", import.meta.url), "utf8"),
    );
    expect(committed).toEqual(jsonSchema());
  });

  it("refuses unknown keys, like the gateway does", () => {
    const schema = jsonSchema() as { additionalProperties?: boolean; properties: Record<string, unknown> };
    expect(schema.additionalProperties).toBe(false);
    expect(Object.keys(schema.properties)).toEqual(
      expect.arrayContaining(["store", "routes", "plans", "clients"]),
    );
  });
});
