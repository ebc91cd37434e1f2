// Writes proto/ from a checkout of envoyproxy/data-plane-api (a bare git dir, read with
// `git show`): the files tollgate's rate-limit service (src/rls/) loads, with the annotations
// it cannot vendor taken out. Only options are removed (udpa, validate, envoy.annotations,
// xds); no field, number, type or name changes, so the wire format is the upstream one.
// base.proto keeps only HeaderValue, the one message of it the service answers with.
//
//   node scripts/vendor-envoy-protos.mjs /path/to/data-plane-api.git
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

const gitDir = process.argv[2];
if (!gitDir) throw new Error("usage: node scripts/vendor-envoy-protos.mjs <data-plane-api git dir>");
const show = (path) =>
  execFileSync("git", ["--git-dir", gitDir, "show", `HEAD:${path}`], { encoding: "utf8" });
const commit = execFileSync("git", ["--git-dir", gitDir, "rev-parse", "HEAD"], { encoding: "utf8" }).trim();

const FILES = [
  "envoy/service/ratelimit/v3/rls.proto",
  "envoy/extensions/common/ratelimit/v3/ratelimit.proto",
  "envoy/type/v3/ratelimit_unit.proto",
  "envoy/type/v3/token_bucket.proto",
  "envoy/config/core/v3/base.proto",
];
const UNVENDORED = /^import "(?:udpa|validate|xds|envoy\/annotations)\/[^"]*";\n/gm;

function trim(path, text) {
  let out = text
    .replace(UNVENDORED, "")
    // File and message options of the unvendored annotations, one or two lines each.
    .replace(/^\s*option \((?:udpa|envoy\.annotations|xds)[^;]*;\n/gm, "")
    // Field options: [(validate.rules)… , (udpa…)…] before a field's `;`.
    .replace(/\s*\[\s*\((?:validate|udpa|envoy\.annotations)[^\]]*\]/g, "");
  if (path.endsWith("core/v3/base.proto")) {
    const start = out.indexOf("// Header name/value pair.\nmessage HeaderValue {");
    const end = out.indexOf("\n}\n", start) + 3;
    if (start < 0) throw new Error("HeaderValue not found in base.proto");
    const head = out.slice(0, out.indexOf("\n// [#protodoc-title"));
    out = `${head.replace(/^import "(?:envoy|google)\/[^"]*";\n/gm, "")}\n${out.slice(start, end)}`;
  }
  return `// Vendored from envoyproxy/data-plane-api ${commit} (${path}), Apache-2.0 (proto/LICENSE).\n// Annotation options removed by scripts/vendor-envoy-protos.mjs; the wire format is unchanged.\n${out.replace(/\n{3,}/g, "\n\n")}`;
}

for (const path of FILES) {
  const target = join("proto", path);
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, trim(path, show(path)));
}
writeFileSync("proto/LICENSE", show("LICENSE"));
console.log(`proto/: ${FILES.length} files from ${commit}`);
