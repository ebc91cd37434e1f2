// What a reload does with a freshly loaded file, decided without touching anything: refuse it,
// keep the current runtime (same version), or swap in a runtime compiled from it with the
// restart-only settings held back. generation.ts carries the decision out.
import { compileRuntime, type Runtime } from "../config/compile.js";
import type { LoadResult } from "../config/load.js";
import type { ConfigProblem } from "../config/problems.js";
import type { ReloadResult } from "../config/reload-result.js";
import { splitRestartOnly } from "../config/restart.js";
import type { Config } from "../config/schema.js";

export type { ReloadResult, ReloadTrigger } from "../config/reload-result.js";

type Loaded = Extract<LoadResult, { ok: true }>;

export type ReloadDecision =
  /** The file has errors: the previous config keeps serving. */
  | { action: "refuse"; result: Extract<ReloadResult, { ok: false }>; warnings: ConfigProblem[] }
  /** The same version as the running one (a SIGHUP that changed nothing). */
  | { action: "keep"; result: Extract<ReloadResult, { ok: true }> }
  /** A new runtime, the restart-only settings kept at their running values. */
  | {
      action: "swap";
      runtime: Runtime;
      result: Extract<ReloadResult, { ok: true }>;
      warnings: ConfigProblem[];
    };

/** The runtime a loaded file compiles to; `config` is the file's own unless a reload held settings back. */
export function runtimeOf(loaded: Loaded, config: Config = loaded.config): Runtime {
  return compileRuntime(config, {
    file: loaded.file,
    version: loaded.version,
    jwt: loaded.jwt,
    keyFile: loaded.keyFile,
    tls: loaded.tls,
    upstreamTls: loaded.upstreamTls,
    rls: loaded.rls,
  });
}

export function decideReload(current: Runtime, loaded: LoadResult): ReloadDecision {
  if (!loaded.ok) {
    return { action: "refuse", result: { ok: false, problems: loaded.problems }, warnings: loaded.warnings };
  }
  // The version hashes the file and the key file it names, so equal versions are equal inputs.
  if (loaded.version === current.version) {
    return {
      action: "keep",
      result: { ok: true, version: loaded.version, changed: false, restartRequired: [] },
    };
  }
  const split = splitRestartOnly(current.config, loaded.config);
  const runtime = runtimeOf(loaded, split.config);
  return {
    action: "swap",
    runtime,
    result: { ok: true, version: runtime.version, changed: true, restartRequired: split.restartRequired },
    warnings: loaded.warnings,
  };
}
