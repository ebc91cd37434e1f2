// `tollgate/client`: what callers of a rate-limited API import. No dependencies.
export { backoffDelayMs, fetchWithRetry, type RetryOptions, serverDelayMs } from "./fetch-with-retry.js";
