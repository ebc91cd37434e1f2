// read → substitute env → parse YAML with positions → validate (schema) → check (semantics).
// Every failure comes back as ConfigProblems with file:line:column; nothing here throws on bad
// input, so `--check`, start-up and reload all report the same way. Warnings (a plan nothing can
// reach) come back beside the config, or beside the errors, and never stop a file being used.
// When the schema fails, the checks still run on the parts that pass (salvage.ts), so one pass
// reports every problem.

import { createHash, X509Certificate } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { Worker } from "node:worker_threads";
import type { JSONWebKeySet } from "jose";
import type { z } from "zod";
import type { RemoteKeysSpec } from "../identity/idp/spec.js";
import { JwtVerifier } from "../identity/jwt-verifier.js";
import type { RlsNode } from "../model/rls.js";
import { checkConfig, type PathProblem } from "./checks.js";
import { type PathSegment, PositionedDocument } from "./document.js";
import { substituteEnv } from "./env.js";
import { type ListenerTls, loadListenerTls } from "./listener-tls.js";
import { type ConfigProblem, suggest } from "./problems.js";
import { readText, whyUnreadable } from "./read-file.js";
import { loadRlsFiles } from "./rls-config.js";
import { salvage } from "./salvage.js";
import { type Config, configSchema } from "./schema.js";
import { loadUpstreamTls, type UpstreamTls } from "./upstream-tls.js";

export type LoadResult =
  | {
      ok: true;
      config: Config;
      file: string;
      version: string;
      jwt: JwtVerifier | undefined;
      /** The JWT key file the config names (public_key_file, jwks_file, or the IdP's ca_file), resolved. */
      keyFile?: string;
      /** That file's text, when asked for (a load on another thread sends it back). */
      keyText?: string;
      /** The listener's certificate and key (listen.tls), read and checked against each other. */
      tls?: ListenerTls;
      /** TLS to each upstream's https targets that sets any (CA, client certificate, SNI). */
      upstreamTls?: Record<string, UpstreamTls>;
      /** The rls config files (`rls.config`), resolved and compiled. */
      rls?: LoadedRls;
      /** Problems that do not stop the file being used, in file order; log them. */
      warnings: ConfigProblem[];
    }
  | { ok: false; problems: ConfigProblem[]; warnings: ConfigProblem[] };

/** `rls.config` read: the files, resolved against the config's directory, and their descriptor trees. */
export interface LoadedRls {
  files: string[];
  domains: Map<string, RlsNode>;
}

export async function loadConfigFile(
  file: string,
  env: Readonly<Record<string, string | undefined>>,
  withKeyText = false,
): Promise<LoadResult> {
  let source: string;
  try {
    source = await readFile(file, "utf8");
  } catch (err) {
    return {
      ok: false,
      problems: [
        { file, line: 1, column: 1, path: "", message: `cannot read the config: ${whyUnreadable(err)}` },
      ],
      warnings: [],
    };
  }
  return loadConfigText(source, file, env, withKeyText);
}

export function loadConfigText(
  source: string,
  file: string,
  env: Readonly<Record<string, string | undefined>>,
  withKeyText = false,
): LoadResult {
  const substituted = substituteEnv(source, env);
  const doc = new PositionedDocument(file, source, substituted.text, substituted.substitutions);
  const envProblems = substituted.problems.map((p) => doc.problemAtSourceOffset(p.offset, "", p.message));
  const syntax = doc.syntaxProblems();
  if (syntax.length || envProblems.length)
    return { ok: false, problems: [...envProblems, ...syntax], warnings: [] };

  const data = doc.toJS();
  if (!data.ok) return { ok: false, problems: [data.problem], warnings: [] };
  const raw = data.value;
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    return {
      ok: false,
      problems: [doc.problem([], "the config must be a YAML mapping (key: value pairs)")],
      warnings: [],
    };
  }
  // reportInput: without it zod 4 leaves issue.input unset, and a wrong type reads as missing.
  const parsed = configSchema.safeParse(raw, { reportInput: true });
  const schemaProblems = parsed.success
    ? []
    : parsed.error.issues.flatMap((issue) => issueProblems(doc, issue));
  // A file that fails the schema is still checked, on the parts of it that pass.
  let checked: PathProblem[];
  if (parsed.success) checked = checkConfig(parsed.data);
  else {
    const partial = salvage(raw as Record<string, unknown>);
    checked = checkConfig(partial.config, partial.invalid);
  }
  const positioned = (p: PathProblem): ConfigProblem => {
    const problem = doc.problem(p.path, p.message, p.atKey === undefined ? {} : { atKey: p.atKey });
    if (p.warning) problem.severity = "warning";
    return problem;
  };
  const warnings = sortProblems(checked.filter((p) => p.warning).map(positioned));
  const errors = [...schemaProblems, ...checked.filter((p) => !p.warning).map(positioned)];
  if (!parsed.success || errors.length) return { ok: false, problems: sortProblems(errors), warnings };

  const jwt = loadJwtVerifier(parsed.data, file);
  const tls = loadListenerTls(parsed.data, file);
  const upstreamTls = loadUpstreamTls(parsed.data, file);
  const rlsFiles = rlsFilesOf(parsed.data, file);
  const rls = rlsFiles === undefined ? undefined : loadRlsFiles(rlsFiles);
  if (rls !== undefined && !rls.ok) return { ok: false, problems: rls.problems, warnings };
  if (!jwt.ok || !tls.ok || !upstreamTls.ok) {
    const problems: ConfigProblem[] = [];
    if (!jwt.ok) problems.push(doc.problem(jwt.path, jwt.message));
    if (!tls.ok) problems.push(doc.problem(["listen", "tls", tls.key], tls.message));
    if (!upstreamTls.ok)
      problems.push(
        doc.problem(["upstreams", upstreamTls.upstream], upstreamTls.message, { atKey: upstreamTls.key }),
      );
    return { ok: false, problems: sortProblems(problems), warnings };
  }
  // The version covers the key file and the listener's certificate too: rotating a JWKS or a
  // certificate is a change that a reload applies, even when the YAML is unchanged.
  const version = createHash("sha256").update(source);
  if (jwt.keyText !== undefined) version.update("\0").update(jwt.keyText);
  if (tls.tls) version.update("\0").update(tls.tls.cert).update("\0").update(tls.tls.key);
  for (const [name, u] of Object.entries(upstreamTls.tls)) version.update("\0").update(name).update(u.hash);
  // And the rls files: editing one is a change a reload applies.
  if (rls?.ok) for (const text of rls.texts) version.update("\0rls\0").update(text);
  const certWarnings = tls.warnings.map((w) => {
    const problem = doc.problem(["listen", "tls", w.key], w.message);
    problem.severity = "warning";
    return problem;
  });
  const loaded: LoadResult = {
    ok: true,
    config: parsed.data,
    file,
    version: version.digest("hex"),
    jwt: jwt.verifier,
    warnings: certWarnings.length ? sortProblems([...warnings, ...certWarnings]) : warnings,
  };
  if (jwt.keyFile !== undefined) loaded.keyFile = jwt.keyFile;
  if (tls.tls) loaded.tls = tls.tls;
  if (Object.keys(upstreamTls.tls).length) loaded.upstreamTls = upstreamTls.tls;
  if (rls?.ok && rlsFiles) loaded.rls = { files: rlsFiles, domains: rls.domains };
  if (withKeyText && jwt.keyText !== undefined) loaded.keyText = jwt.keyText;
  return loaded;
}

/** `rls.config` as absolute paths (relative to the config's directory); undefined without `rls`. */
function rlsFilesOf(config: Config, file: string): string[] | undefined {
  if (config.rls === undefined) return undefined;
  const written = typeof config.rls.config === "string" ? [config.rls.config] : config.rls.config;
  return written.map((f) => resolve(dirname(file), f));
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
  | { ok: true; verifier: JwtVerifier | undefined; keyText?: string; keyFile?: string }
  | { ok: false; path: PathSegment[]; message: string } {
  const jwt = config.identity.jwt;
  if (!jwt) return { ok: true, verifier: undefined };
  const keyName =
    jwt.public_key_file !== undefined
      ? "public_key_file"
      : jwt.jwks_file !== undefined
        ? "jwks_file"
        : jwt.secret !== undefined
          ? "secret"
          : "ca_file";
  const path: PathSegment[] = ["identity", "jwt", keyName];
  if (keyName === "ca_file") return loadRemoteKeys(config, file, path);
  if (jwt.secret !== undefined) {
    try {
      return { ok: true, verifier: jwtVerifierFor(config, undefined) };
    } catch (err) {
      return { ok: false, path, message: `the key cannot be used: ${(err as Error).message}` };
    }
  }
  const keyFile = resolve(dirname(file), (jwt.public_key_file ?? jwt.jwks_file)!);
  const read = readText(keyFile);
  if (!read.ok) return { ok: false, path, message: read.message };
  const keyText = read.text;
  try {
    return { ok: true, verifier: jwtVerifierFor(config, keyText), keyText, keyFile };
  } catch (err) {
    if (err instanceof NotJsonError) {
      return { ok: false, path, message: `${keyFile} is not JSON (expected a JWKS: {"keys": [...]})` };
    }
    return { ok: false, path, message: `the key cannot be used: ${(err as Error).message}` };
  }
}

/**
 * An identity provider's keys (jwks_url, or issuer alone): nothing is fetched here (`--check` is
 * offline); the CA file, when named, is read and checked, and stands in for the key file (its
 * text versions the config, and it is watched).
 */
function loadRemoteKeys(
  config: Config,
  file: string,
  path: PathSegment[],
):
  | { ok: true; verifier: JwtVerifier | undefined; keyText?: string; keyFile?: string }
  | { ok: false; path: PathSegment[]; message: string } {
  const caFile = config.identity.jwt?.ca_file;
  if (caFile === undefined) return { ok: true, verifier: jwtVerifierFor(config, undefined) };
  const keyFile = resolve(dirname(file), caFile);
  const read = readText(keyFile);
  if (!read.ok) return { ok: false, path, message: read.message };
  try {
    new X509Certificate(read.text);
  } catch {
    return {
      ok: false,
      path,
      message: `${keyFile} holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)`,
    };
  }
  return { ok: true, verifier: jwtVerifierFor(config, read.text), keyText: read.text, keyFile };
}

class NotJsonError extends Error {}

/**
 * The verifier of a validated config's identity.jwt, from the key file's text (already read:
 * the loader reads it, or it arrives from the thread that did). Throws naming what is wrong.
 */
export function jwtVerifierFor(config: Config, keyText: string | undefined): JwtVerifier | undefined {
  const jwt = config.identity.jwt;
  if (!jwt) return undefined;
  const options = {
    issuer: jwt.issuer,
    audience: jwt.audience,
    clockToleranceMs: jwt.clock_tolerance,
    claims: jwt.claims,
  };
  if (jwt.secret !== undefined) return new JwtVerifier({ secret: jwt.secret }, options);
  if (jwt.public_key_file === undefined && jwt.jwks_file === undefined) {
    // issuer alone or jwks_url; keyText is the ca_file's certificates, if any.
    const remote: RemoteKeysSpec = {
      fetchTimeoutMs: jwt.fetch_timeout,
      refetchIntervalMs: jwt.refetch_interval,
      cacheFloorMs: jwt.cache_floor,
      cacheCeilingMs: jwt.cache_ceiling,
    };
    if (jwt.jwks_url !== undefined) remote.jwksUrl = jwt.jwks_url;
    else remote.issuer = jwt.issuer;
    if (keyText !== undefined) remote.ca = keyText;
    return new JwtVerifier({ remote }, options);
  }
  if (keyText === undefined) throw new Error("the key file was not read");
  if (jwt.public_key_file !== undefined) return new JwtVerifier({ publicKeyPem: keyText }, options);
  let jwks: unknown;
  try {
    jwks = JSON.parse(keyText);
  } catch {
    throw new NotJsonError("not JSON");
  }
  return new JwtVerifier({ jwks: jwks as JSONWebKeySet }, options);
}

/** What a load on another thread sends back: plain data (a JwtVerifier cannot be cloned). */
export type TransferableLoad =
  | {
      ok: true;
      config: Config;
      file: string;
      version: string;
      keyFile?: string;
      keyText?: string;
      tls?: ListenerTls;
      upstreamTls?: Record<string, UpstreamTls>;
      rls?: LoadedRls;
      warnings: ConfigProblem[];
    }
  | { ok: false; problems: ConfigProblem[]; warnings: ConfigProblem[] };

/** loadConfigFile for a worker thread: the same, with the key text instead of the verifier. */
export async function loadForTransfer(
  file: string,
  env: Readonly<Record<string, string | undefined>>,
): Promise<TransferableLoad> {
  const loaded = await loadConfigFile(file, env, true);
  if (!loaded.ok) return loaded;
  const out: TransferableLoad = {
    ok: true,
    config: loaded.config,
    file: loaded.file,
    version: loaded.version,
    warnings: loaded.warnings,
  };
  if (loaded.keyFile !== undefined) out.keyFile = loaded.keyFile;
  if (loaded.keyText !== undefined) out.keyText = loaded.keyText;
  if (loaded.tls !== undefined) out.tls = loaded.tls;
  if (loaded.upstreamTls !== undefined) out.upstreamTls = loaded.upstreamTls;
  if (loaded.rls !== undefined) out.rls = loaded.rls;
  return out;
}

/** Where the worker's code is when running the built gateway; from TypeScript sources, none. */
const WORKER = import.meta.url.endsWith(".js") ? new URL("./load-worker.js", import.meta.url) : null;

/**
 * Files smaller than this load on the event loop: a few milliseconds, less than starting a
 * thread (which takes a few hundred, its modules loaded cold), so a small config still applies
 * at once. Loading is linear, so below this size it never blocks for more than ~20 ms.
 */
const OFF_THREAD_MIN_BYTES = 32 * 1024;

/**
 * loadConfigFile on a worker thread, for reloads: parsing and validating a large file takes
 * a few hundred milliseconds (the YAML parser alone, ~300 ms for 320 KB) that would otherwise
 * stop every request in flight. Only the result crosses back; the verifier is rebuilt from the
 * key text (the worker already checked that it builds). Small files, and where no worker can run
 * (the gateway run from its TypeScript sources, or a worker that fails to start), load on this
 * thread.
 */
export async function loadConfigFileOffThread(
  file: string,
  env: Readonly<Record<string, string | undefined>>,
): Promise<LoadResult> {
  const size = await stat(file).then(
    (s) => s.size,
    () => 0,
  );
  const transferred = WORKER && size >= OFF_THREAD_MIN_BYTES ? await onWorker(WORKER, file, env) : null;
  if (!transferred) return loadConfigFile(file, env);
  if (!transferred.ok) return transferred;
  let jwt: JwtVerifier | undefined;
  try {
    jwt = jwtVerifierFor(transferred.config, transferred.keyText);
  } catch (err) {
    const where = transferred.keyFile ?? "identity.jwt";
    return {
      ok: false,
      problems: [
        { file, line: 1, column: 1, path: "identity.jwt", message: `${where}: ${(err as Error).message}` },
      ],
      warnings: transferred.warnings,
    };
  }
  const loaded: LoadResult = {
    ok: true,
    config: transferred.config,
    file: transferred.file,
    version: transferred.version,
    jwt,
    warnings: transferred.warnings,
  };
  if (transferred.keyFile !== undefined) loaded.keyFile = transferred.keyFile;
  if (transferred.tls !== undefined) loaded.tls = transferred.tls;
  if (transferred.upstreamTls !== undefined) loaded.upstreamTls = transferred.upstreamTls;
  if (transferred.rls !== undefined) loaded.rls = transferred.rls;
  return loaded;
}

/** Runs one load on a new worker thread; null if the worker could not do it. */
function onWorker(
  url: URL,
  file: string,
  env: Readonly<Record<string, string | undefined>>,
): Promise<TransferableLoad | null> {
  return new Promise((resolveLoad) => {
    let worker: Worker;
    try {
      worker = new Worker(url, { workerData: { file, env: { ...env } } });
    } catch {
      resolveLoad(null);
      return;
    }
    let result: TransferableLoad | null = null;
    worker.once("message", (message: TransferableLoad) => {
      result = message;
    });
    worker.once("error", () => resolveLoad(null));
    worker.once("exit", () => resolveLoad(result));
  });
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
  if (issue.code === "invalid_key") {
    // A record key the schema refuses (a plan name): point at the key, say what it should be.
    const key = path[path.length - 1];
    const why = issue.issues[0]?.message ?? issue.message;
    return [
      doc.problem(path.slice(0, -1), `${JSON.stringify(String(key))} cannot be used: ${why}`, {
        atKey: String(key),
      }),
    ];
  }
  if (issue.code === "invalid_type" && issue.input === undefined) {
    const last = path[path.length - 1];
    return [doc.problem(path.slice(0, -1), `${String(last)} is required`)];
  }
  if (issue.code === "invalid_union") {
    // The branch that got furthest into the value says what is wrong with it (`window: 60000`
    // in an auth_failures mapping is a bad duration, not a bad union); when no branch got past
    // the value's shape, say which shapes are accepted.
    // A branch that refused the value only because its members are not mappings (a map of named
    // limits, given one limit) is the wrong shape altogether, not the furthest fit.
    const wrongShape = (branch: z.core.$ZodIssue[]) =>
      branch.length > 0 &&
      branch.every((i) => i.code === "invalid_type" && i.expected === "object" && i.path.length === 1);
    const all = (issue as { errors?: z.core.$ZodIssue[][] }).errors ?? [];
    const fitting = all.filter((b) => !wrongShape(b));
    // A branch that took the value as a map and refused only a key's spelling fits it best.
    const keyed = fitting.find((b) => b.every((i) => i.code === "invalid_key"));
    const branches = keyed ? [keyed] : fitting.length > 0 ? fitting : all;
    let best: z.core.$ZodIssue[] | undefined;
    let depth = 0;
    for (const branch of branches) {
      const deepest = Math.max(0, ...branch.map((i) => i.path.length));
      if (deepest > depth) {
        depth = deepest;
        best = branch;
      }
    }
    if (best) return best.flatMap((i) => issueProblems(doc, { ...i, path: [...issue.path, ...i.path] }));
    return [
      doc.problem(
        path,
        path[0] === "upstreams"
          ? "expected a URL string or a mapping with url or targets, timeout, connect_timeout, connections"
          : issue.message,
      ),
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
      const shape = objectBranch(def)?.def.shape as Record<string, unknown> | undefined;
      // A key the mapping branch lacks may be a record branch's (a plan route's named limits).
      const record = (def.options as unknown[])
        .map((o) => unwrap(o) as { def?: Record<string, unknown> } | undefined)
        .find((o) => o?.def?.type === "record");
      const member = shape?.[String(segment)];
      if (member !== undefined) schema = member;
      else if (record) schema = record.def!.valueType;
      else return [];
    } else return [];
  }
  let def = (unwrap(schema) as { def?: Record<string, unknown> } | undefined)?.def;
  // A key inside a union (auth_failures: false | { limit, window }): the mapping branch's keys.
  if (def?.type === "union") def = objectBranch(def)?.def;
  return def?.type === "object" ? Object.keys(def.shape as object) : [];
}

/** The mapping among a union's branches (`false | { … }`), unwrapped. */
function objectBranch(def: Record<string, unknown>): { def: Record<string, unknown> } | undefined {
  for (const option of def.options as unknown[]) {
    const o = unwrap(option) as { def?: Record<string, unknown> } | undefined;
    if (o?.def?.type === "object") return o as { def: Record<string, unknown> };
  }
  return undefined;
}

function unwrap(schema: unknown): unknown {
  let s = schema as { def?: { type: string; innerType?: unknown; in?: unknown } } | undefined;
  while (s?.def && ["optional", "default", "pipe", "nullable"].includes(s.def.type)) {
    s = (s.def.innerType ?? s.def.in) as typeof s;
  }
  return s;
}

function sortProblems(problems: ConfigProblem[]): ConfigProblem[] {
  return problems.sort((a, b) => a.line - b.line || a.column - b.column);
}
