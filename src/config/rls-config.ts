// envoyproxy/ratelimit's YAML (`rls.config`), read and checked like tollgate's own file: every
// problem with file:line:column and the fix, all of them in one pass, never a throw on bad
// input. The format is that service's (src/config/config_impl.go there): `domain`, nested
// `descriptors` of `key`/`value`, `rate_limit: { unit, requests_per_unit, unlimited, name,
// replaces }`, `shadow_mode`, `share_threshold`, `detailed_metric`, `value_to_metric`. Stricter in
// one way: a key is accepted only where it means something (that service accepts any of its keys
// at any depth). `quota_mode` and `metadata` are refused: tollgate does not implement them, and
// accepting them silently would answer differently from what the file says.
import { readFileSync } from "node:fs";
import type { RlsNode, RlsRule, RlsUnit } from "../model/rls.js";
import { UNIT_SECONDS, windowSpecOf } from "../rls/units.js";
import { type PathSegment, PositionedDocument } from "./document.js";
import { type ConfigProblem, suggest } from "./problems.js";
import { whyUnreadable } from "./read-file.js";

const UNITS = Object.keys(UNIT_SECONDS) as RlsUnit[];

const ROOT_KEYS = ["domain", "descriptors"];
const DESCRIPTOR_KEYS = [
  "key",
  "value",
  "rate_limit",
  "descriptors",
  "shadow_mode",
  "detailed_metric",
  "value_to_metric",
  "share_threshold",
];
const RATE_LIMIT_KEYS = ["unit", "requests_per_unit", "unlimited", "name", "replaces"];
const UNSUPPORTED: Record<string, string> = {
  quota_mode: "quota_mode is not supported by tollgate's rate-limit service; remove it (docs/envoy.md)",
  metadata: "metadata is not supported by tollgate's rate-limit service; remove it (docs/envoy.md)",
};
const MAX_UINT32 = 4_294_967_295;

export type RlsLoad =
  | { ok: true; domains: Map<string, RlsNode>; texts: string[] }
  | { ok: false; problems: ConfigProblem[] };

/** Reads and compiles the files in order; a domain may be in one of them only. */
export function loadRlsFiles(files: readonly string[]): RlsLoad {
  const domains = new Map<string, RlsNode>();
  const texts: string[] = [];
  const problems: ConfigProblem[] = [];
  const seen = new Map<string, string>();
  for (const file of files) {
    let source: string;
    try {
      source = readFileSync(file, "utf8");
    } catch (err) {
      problems.push({
        file,
        line: 1,
        column: 1,
        path: "",
        message: `cannot read the rls config: ${whyUnreadable(err)}`,
      });
      continue;
    }
    texts.push(source);
    const compiled = compileRlsText(source, file);
    if (!compiled.ok) {
      problems.push(...compiled.problems);
      continue;
    }
    const before = seen.get(compiled.domain);
    if (before !== undefined) {
      problems.push(
        compiled.doc.problem(
          ["domain"],
          `duplicate domain '${compiled.domain}': ${before} has it already; keep each domain in one file`,
        ),
      );
      continue;
    }
    seen.set(compiled.domain, file);
    domains.set(compiled.domain, compiled.root);
  }
  return problems.length ? { ok: false, problems } : { ok: true, domains, texts };
}

type Compiled =
  | { ok: true; domain: string; root: RlsNode; doc: PositionedDocument }
  | { ok: false; problems: ConfigProblem[] };

/** One file's text: its domain and descriptor tree, or every problem in it. */
export function compileRlsText(source: string, file: string): Compiled {
  const doc = new PositionedDocument(file, source, source, []);
  const syntax = doc.syntaxProblems();
  if (syntax.length) return { ok: false, problems: syntax };
  const data = doc.toJS();
  if (!data.ok) return { ok: false, problems: [data.problem] };
  const problems: ConfigProblem[] = [];
  const at = (path: readonly PathSegment[], message: string, atKey?: string) =>
    problems.push(doc.problem(path, message, atKey === undefined ? {} : { atKey }));
  const raw = data.value;
  if (!isMapping(raw)) {
    at([], "an rls config is a YAML mapping with domain and descriptors (envoyproxy/ratelimit's format)");
    return { ok: false, problems };
  }
  unknownKeys(raw, [], ROOT_KEYS, at);
  const domain = raw.domain;
  if (typeof domain !== "string" || domain === "")
    at(
      ["domain"],
      "config file cannot have empty domain: give domain the name Envoy's requests carry (its rate limit filter's domain)",
    );
  const root = descriptorsOf(
    raw.descriptors,
    ["descriptors"],
    `${typeof domain === "string" ? domain : ""}.`,
    at,
  );
  if (problems.length) return { ok: false, problems };
  return {
    ok: true,
    domain: domain as string,
    root: { ...root, rule: undefined, sharedValue: undefined },
    doc,
  };
}

type At = (path: readonly PathSegment[], message: string, atKey?: string) => void;

function descriptorsOf(
  value: unknown,
  path: PathSegment[],
  parentKey: string,
  at: At,
): Pick<RlsNode, "children" | "wildcards"> {
  const children = new Map<string, RlsNode>();
  const wildcards: { key: string; parts: string[] }[] = [];
  if (value === undefined || value === null) return { children, wildcards };
  if (!Array.isArray(value)) {
    at(path, "descriptors is a list of mappings, each with a key");
    return { children, wildcards };
  }
  value.forEach((d, i) => {
    const here = [...path, i];
    if (!isMapping(d)) {
      at(
        here,
        "each entry of descriptors is a mapping with a key (and maybe value, rate_limit, descriptors)",
      );
      return;
    }
    unknownKeys(d, here, DESCRIPTOR_KEYS, at);
    const key = scalarText(d.key);
    if (key === undefined || key === "") {
      at(
        here,
        "descriptor has empty key: give it the key Envoy's descriptor entry sends",
        d.key === undefined ? undefined : "key",
      );
      return;
    }
    const entryValue = d.value === undefined || d.value === null ? "" : scalarText(d.value);
    if (entryValue === undefined) {
      at([...here, "value"], "value is a string (empty or absent: any value)");
      return;
    }
    const finalKey = entryValue === "" ? key : `${key}_${entryValue}`;
    const fullKey = parentKey + finalKey;
    if (children.has(finalKey)) {
      at(here, `duplicate descriptor composite key '${fullKey}': merge the two entries`);
      return;
    }
    for (const flag of ["shadow_mode", "detailed_metric", "value_to_metric", "share_threshold"] as const) {
      if (d[flag] !== undefined && typeof d[flag] !== "boolean")
        at([...here, flag], `${flag} is true or false`);
    }
    const shared = d.share_threshold === true;
    if (shared && !finalKey.includes("*"))
      at(
        [...here, "share_threshold"],
        `share_threshold can only be used with wildcard values (containing '*'), but found key '${finalKey}'`,
      );
    const rule = ruleOf(d.rate_limit, [...here, "rate_limit"], fullKey, d.shadow_mode === true, at);
    const nested = descriptorsOf(d.descriptors, [...here, "descriptors"], `${fullKey}.`, at);
    if (finalKey.includes("*")) wildcards.push({ key: finalKey, parts: finalKey.split("*") });
    children.set(finalKey, {
      ...nested,
      rule,
      sharedValue: shared ? finalKey.slice(key.length + 1) : undefined,
    });
  });
  return { children, wildcards };
}

function ruleOf(
  value: unknown,
  path: PathSegment[],
  fullKey: string,
  shadow: boolean,
  at: At,
): RlsRule | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isMapping(value)) {
    at(path, "rate_limit is a mapping: { unit, requests_per_unit } or { unlimited: true }");
    return undefined;
  }
  unknownKeys(value, path, RATE_LIMIT_KEYS, at);
  const unlimited = value.unlimited === true;
  if (value.unlimited !== undefined && typeof value.unlimited !== "boolean")
    at([...path, "unlimited"], "unlimited is true or false");
  const unitText = typeof value.unit === "string" ? value.unit.toLowerCase() : undefined;
  const unit = UNITS.find((u) => u === unitText);
  if (unlimited && unit !== undefined)
    at([...path, "unit"], "should not specify rate limit unit when unlimited: remove unit (or unlimited)");
  else if (!unlimited && unit === undefined)
    at(
      value.unit === undefined ? path : [...path, "unit"],
      `invalid rate limit unit '${value.unit === undefined ? "" : String(value.unit)}': expected one of ${UNITS.join(", ")}`,
    );
  const perUnit = value.requests_per_unit;
  if (!unlimited && perUnit === undefined)
    at(path, "requests_per_unit is missing: how many requests each unit allows (0 refuses every one)");
  else if (
    perUnit !== undefined &&
    !(Number.isInteger(perUnit) && (perUnit as number) >= 0 && (perUnit as number) <= MAX_UINT32)
  )
    at([...path, "requests_per_unit"], "requests_per_unit is a whole number from 0 to 4294967295");
  const name = value.name === undefined ? undefined : scalarText(value.name);
  if (value.name !== undefined && name === undefined) at([...path, "name"], "name is a string");
  const replaces: string[] = [];
  if (value.replaces !== undefined) {
    if (!Array.isArray(value.replaces))
      at([...path, "replaces"], "replaces is a list of { name: <a limit's name> }");
    else
      value.replaces.forEach((r, i) => {
        const here = [...path, "replaces", i];
        if (!isMapping(r)) {
          at(here, "each entry of replaces is { name: <a limit's name> }");
          return;
        }
        unknownKeys(r, here, ["name"], at);
        const replaced = scalarText(r.name);
        if (replaced === undefined || replaced === "")
          at(here, "should not have an empty replaces entry: give the name of the limit it replaces");
        else if (replaced === name) at(here, "replaces should not contain name of same descriptor");
        else replaces.push(replaced);
      });
  }
  const u = unit ?? "second";
  const requestsPerUnit = typeof perUnit === "number" ? perUnit : 0;
  return {
    fullKey,
    name: name === "" ? undefined : name,
    unlimited,
    unit: u,
    requestsPerUnit,
    shadow,
    replaces,
    spec: windowSpecOf(fullKey, u, requestsPerUnit, shadow),
  };
}

function unknownKeys(
  map: Record<string, unknown>,
  path: PathSegment[],
  known: readonly string[],
  at: At,
): void {
  for (const key of Object.keys(map)) {
    if (known.includes(key)) continue;
    const unsupported = UNSUPPORTED[key];
    if (unsupported !== undefined && known === DESCRIPTOR_KEYS) {
      at(path, unsupported, key);
      continue;
    }
    const close = suggest(key, known);
    at(
      path,
      `unknown key '${key}'${close ? ` (did you mean ${close}?)` : ""}; expected one of ${known.join(", ")}`,
      key,
    );
  }
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** A string, or a number or boolean written where a string goes (YAML reads `value: 200` as a number). */
function scalarText(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return undefined;
}
