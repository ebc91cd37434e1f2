// A route's deadline for one upstream exchange: from the moment the request is dispatched to the
// last byte of the response, head and body, whatever the upstream does in between. undici's own
// timeouts are idle timeouts (a byte every few seconds resets them): they stay, no longer than
// the deadline, as a backstop, and this timer is what bounds the whole.
//
// A route may also wait for its connection less long than its pool allows (connect_timeout
// shorter than the pool's, which is one per upstream: compile.ts). That wait is timed here from
// dispatch until undici hands the request a connection, so it also counts a wait for a free
// connection when every pooled one is busy.
import { afterDeadline } from "../deadline.js";

/** What bounds one exchange of a route (compile.ts: the route's values, else its upstream's). */
export interface ExchangeTimeouts {
  /** The whole exchange; 0: no deadline. */
  timeoutMs: number;
  /** Set only when shorter than the pool's connect timeout, which bounds it otherwise. */
  connectWaitMs: number | undefined;
}

/** The route's deadline passed; the exchange is aborted with it. */
export class UpstreamDeadlineError extends Error {
  readonly code = "TOLLGATE_UPSTREAM_DEADLINE";
  constructor(readonly ms: number) {
    super(`the upstream exchange passed its ${ms} ms deadline`);
    this.name = "UpstreamDeadlineError";
  }
}

/** The request had no connection within the route's connect_timeout; it was never sent. */
export class ConnectWaitError extends Error {
  readonly code = "TOLLGATE_CONNECT_WAIT";
  constructor(readonly ms: number) {
    super(`no connection to the upstream within ${ms} ms`);
    this.name = "ConnectWaitError";
  }
}

export interface ExchangeDeadline {
  /** The request was given its connection: the connect wait is over. */
  connected(): void;
  /** The exchange is over (or failed): nothing fires any more. */
  clear(): void;
}

/**
 * Starts the exchange's timers; `fire` gets the error to abort with, at most once. Each timer
 * decides after the I/O that arrived meanwhile has been read (deadline.ts), so a response that
 * ended in time is never cut by a timer of the same event-loop turn.
 */
export function startExchangeDeadline(
  t: ExchangeTimeouts,
  fire: (err: UpstreamDeadlineError | ConnectWaitError) => void,
): ExchangeDeadline {
  // afterDeadline's timer hands over to setImmediate before it fires: clearing it then is too
  // late, so each callback also asks whether it is still wanted.
  let done = false;
  let waiting = t.connectWaitMs !== undefined;
  const once = (err: UpstreamDeadlineError | ConnectWaitError) => {
    if (done) return;
    done = true;
    clearTimeout(whole);
    clearTimeout(wait);
    fire(err);
  };
  const whole =
    t.timeoutMs > 0
      ? afterDeadline(t.timeoutMs, () => once(new UpstreamDeadlineError(t.timeoutMs)))
      : undefined;
  const wait =
    t.connectWaitMs !== undefined
      ? afterDeadline(t.connectWaitMs, () => {
          if (waiting) once(new ConnectWaitError(t.connectWaitMs!));
        })
      : undefined;
  return {
    connected() {
      waiting = false;
      clearTimeout(wait);
    },
    clear() {
      done = true;
      clearTimeout(whole);
      clearTimeout(wait);
    },
  };
}
