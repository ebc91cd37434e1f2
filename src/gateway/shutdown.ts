// The grace of a graceful stop: the proxy has stopped accepting; requests in flight get up to
// `graceMs` to finish while their keep-alive connections are closed as they go idle.

/** What the wait needs of the proxy's http.Server. */
export interface IdleClosable {
  closeIdleConnections(): void;
}

/** How often the wait looks at the in-flight count. */
const POLL_MS = 20;

/**
 * Waits until no request is in flight or `graceMs` has passed, closing idle connections (a
 * keep-alive connection that finished its response becomes idle) on every look. Resolves with
 * the number still in flight: the requests the caller must cut.
 */
export async function finishInFlight(
  proxy: IdleClosable | undefined,
  inFlight: { readonly count: number },
  graceMs: number,
): Promise<number> {
  proxy?.closeIdleConnections();
  const deadline = Date.now() + graceMs;
  while (inFlight.count > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, POLL_MS));
    proxy?.closeIdleConnections();
  }
  return inFlight.count;
}
