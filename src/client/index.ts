// `tollgate/client`: what callers of a rate-limited API import. It imports nothing, though the
// package it ships in has the gateway's dependencies (README, "For callers").
export { backoffDelayMs, fetchWithRetry, type RetryOptions, serverDelayMs } from "./fetch-with-retry.js";
