// Regenerates docs/problems.md from the problem table as built (dist/http/problem.js: the table,
// and the comments above its entries, which say what each code means). `npm run docs` runs it.
import { readFileSync, writeFileSync } from "node:fs";
import { PROBLEMS } from "../dist/http/problem.js";
import { problemReference } from "./problem-docs.mjs";

const module = readFileSync(new URL("../dist/http/problem.js", import.meta.url), "utf8");
const file = new URL("../docs/problems.md", import.meta.url);
writeFileSync(file, problemReference(PROBLEMS, module));
console.log(`wrote ${file.pathname}`);
