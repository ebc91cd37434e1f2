// `tollgate/gateway`: the gateway as a library (what the CLI runs), with the config loading it
// starts from. Its own entry so that `tollgate`, the limiter, loads without the proxy's
// dependencies (undici, pino, prom-client).

export { compileRuntime, type Runtime } from "../config/compile.js";
export { type LoadResult, loadConfigFile, loadConfigText } from "../config/load.js";
export { ConfigError, type ConfigProblem, formatProblem } from "../config/problems.js";
export type { Config } from "../config/schema.js";
export { Gateway, type GatewayOptions, type ReloadResult } from "./gateway.js";
