// read → substitute env → parse YAML with positions → validate (schema) → check (semantics).
// Every failure comes back as ConfigProblems with file:line:column; nothing here throws on bad
// input, so `--check`, start-up and reload all report the same way.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import type { JSONWebKeySet } from "jose";
import type { z } from "zod";
import { JwtVerifier } from "../identity/jwt.js";
import { checkConfig } from "./checks.js";
import { type PathSegment, PositionedDocument } from "./document.js";
import { substituteEnv } from "./env.js";
import { type ConfigProblem, suggest } from "./problems.js";
import { type Config, configSchema } from "./schema.js";

export type LoadResult =
  | { ok: true; config: Config; file: string; version: string; jwt: JwtVerifier | undefined }
  | { ok: false; problems: ConfigProblem[] };

export async function loadConfigFile(
  file: string,
  env: Readonly<Record<string, string | undefined>>,
): Promise<LoadResult> {
  let source: string;
  try {
    source = await readFile(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file" : code === "EACCES" ? "permission denied" : String(err);
    return {
      ok: false,
      problems: [{ file, line: 1, column: 1, path: "", message: `cannot read the config: ${why}` }],
    };
  }
  return loadConfigText(source, file, env);
}

export function loadConfigText(
  source: string,
  file: string,
  env: Readonly<Record<string, string | undefined>>,
): LoadResult {
  const substituted = substituteEnv(source, env);
  const doc = new PositionedDocument(file, source, substituted.text, substituted.substitutions);
  const envProblems = substituted.problems.map((p) => {
    const { line, col } = lineCol(source, p.offset);
    return { file, line, column: col, path: "", message: p.message };
  });
  const syntax = doc.syntaxProblems();
  if (syntax.length || envProblems.length) return { ok: false, problems: [...envProblems, ...syntax] };

  const data = doc.toJS();
  if (!data.ok) return { ok: false, problems: [data.problem] };
  const raw = data.value;
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    return { ok: false, problems: [doc.problem([], "the config must be a YAML mapping (key: value pairs)")] };
  }
  // reportInput: without it zod 4 leaves issue.input unset, and a wrong type reads as missing.
  const parsed = configSchema.safeParse(raw, { reportInput: true });
  if (!parsed.success) {
    return {
      ok: false,
      problems: sortProblems(parsed.error.issues.flatMap((issue) => issueProblems(doc, issue))),
    };
  }
  const semantic = checkConfig(parsed.data);
  if (semantic.length) {
    return {
      ok: false,
      problems: sortProblems(
        semantic.map((p) => doc.problem(p.path, p.message, p.atKey === undefined ? {} : { atKey: p.atKey })),
      ),
    };
  }
  const jwt = loadJwtVerifier(parsed.data, file);
  if (!jwt.ok) return { ok: false, problems: [doc.problem(jwt.path, jwt.message)] };
  // The version covers the key file too: rotating a JWKS is a change that a reload applies.
  const version = createHash("sha256").update(source);
  if (jwt.keyText !== undefined) version.update("\0").update(jwt.keyText);
  return { ok: true, config: parsed.data, file, version: version.digest("hex"), jwt: jwt.verifier };
}

/**
 * Reads the JWT key material the config names (files relative to the config's directory), so a
 * reload re-reads it. A file that cannot be read or a key that cannot be used is a config error
 * at that key.
 */
function loadJwtVerifier(
  config: Config,
  file: string,
):
  | { ok: true; verifier: JwtVerifier | undefined; keyText?: string }
  | { ok: false; path: PathSegment[]; message: string } {
  const jwt = config.identity.jwt;
  if (!jwt) return { ok: true, verifier: undefined };
  const keyName =
    jwt.public_key_file !== undefined
      ? "public_key_file"
      : jwt.jwks_file !== undefined
        ? "jwks_file"
        : "secret";
  const path: PathSegment[] = ["identity", "jwt", keyName];
  const options = {
    issuer: jwt.issuer,
    audience: jwt.audience,
    clockToleranceMs: jwt.clock_tolerance,
    claims: jwt.claims,
  };
  try {
    if (jwt.secret !== undefined)
      return { ok: true, verifier: new JwtVerifier({ secret: jwt.secret }, options) };
    const keyFile = resolve(dirname(file), (jwt.public_key_file ?? jwt.jwks_file)!);
    let text: string;
    try {
      text = readFileSync(keyFile, "utf8");
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      return {
        ok: false,
        path,
        message: `cannot read ${keyFile}: ${code === "ENOENT" ? "no such file" : String(code ?? err)}`,
      };
    }
    if (jwt.public_key_file !== undefined) {
      return { ok: true, verifier: new JwtVerifier({ publicKeyPem: text }, options), keyText: text };
    }
    let jwks: unknown;
    try {
      jwks = JSON.parse(text);
    } catch {
      return { ok: false, path, message: `${keyFile} is not JSON (expected a JWKS: {"keys": [...]})` };
    }
    return { ok: true, verifier: new JwtVerifier({ jwks: jwks as JSONWebKeySet }, options), keyText: text };
  } catch (err) {
    return { ok: false, path, message: `the key cannot be used: ${(err as Error).message}` };
  }
}

function issueProblems(doc: PositionedDocument, issue: z.core.$ZodIssue): ConfigProblem[] {
  const path = issue.path.filter((s): s is PathSegment => typeof s !== "symbol");
  if (issue.code === "unrecognized_keys") {
    const known = knownKeysAt(path);
    return issue.keys.map((key) => {
      const hint = suggest(key, known);
      const fix = hint
        ? `; did you mean "${hint}"?`
        : known.length
          ? `; expected one of: ${known.join(", ")}`
          : "";
      return doc.problem(path, `unknown key "${key}"${fix}`, { atKey: key });
    });
  }
  if (issue.code === "invalid_type" && issue.input === undefined) {
    const last = path[path.length - 1];
    return [doc.problem(path.slice(0, -1), `${String(last)} is required`)];
  }
  if (issue.code === "invalid_union") {
    return [
      doc.problem(path, "expected a URL string or a mapping with url, timeout, connect_timeout, connections"),
    ];
  }
  return [doc.problem(path, issue.message)];
}

/** The keys a strict object accepts at `path`, for "did you mean" hints. */
function knownKeysAt(path: readonly PathSegment[]): string[] {
  let schema: unknown = configSchema;
  for (const segment of path) {
    schema = unwrap(schema);
    const def = (schema as { def?: Record<string, unknown> }).def;
    if (!def) return [];
    if (def.type === "object") schema = (def.shape as Record<string, unknown>)[String(segment)];
    else if (def.type === "record") schema = def.valueType;
    else if (def.type === "array") schema = def.element;
    else if (def.type === "union") {
      schema = (def.options as unknown[]).find(
        (o) => (unwrap(o) as { def: { type: string } }).def.type === "object",
      );
    } else return [];
  }
  schema = unwrap(schema);
  const def = (schema as { def?: Record<string, unknown> }).def;
  return def?.type === "object" ? Object.keys(def.shape as object) : [];
}

function unwrap(schema: unknown): unknown {
  let s = schema as { def?: { type: string; innerType?: unknown; in?: unknown } } | undefined;
  while (s?.def && ["optional", "default", "pipe", "nullable"].includes(s.def.type)) {
    s = (s.def.innerType ?? s.def.in) as typeof s;
  }
  return s;
}

function lineCol(text: string, offset: number): { line: number; col: number } {
  const before = text.slice(0, offset);
  const line = before.split("\n").length;
  return { line, col: offset - before.lastIndexOf("\n") };
}

function sortProblems(problems: ConfigProblem[]): ConfigProblem[] {
  return problems.sort((a, b) => a.line - b.line || a.column - b.column);
}
