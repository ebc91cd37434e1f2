// Deadlines that are judged after the I/O already received. Each turn of the event loop runs
// its timers before it reads sockets: when the loop lags (a burst of connections, a long
// garbage collection), a reply that arrived in time would lose to its own timer.
//
// Reading once more is not enough either. A turn's poll phase asks the kernel which sockets are
// readable once, at its start, and then runs every callback that answer named: under a burst of
// new connections that phase alone can last hundreds of milliseconds (measured: replies read
// 100–250 ms after Redis ran the script, with one core busy elsewhere and 1200 requests arriving
// at two gateways), and a reply that arrived during it is seen only by the next turn's poll. So a deadline fires from a timer, waits for the
// check phase of that turn, and decides on the check phase of the turn after: by then the
// kernel has been asked again after the deadline had passed, and every reply that arrived before
// it has been read. The price is one more turn before a timeout is declared, never a reply
// thrown away that came in time.

/** Calls `fire` once `ms` have passed and the I/O that arrived meanwhile has been read. */
export function afterDeadline(ms: number, fire: () => void): NodeJS.Timeout {
  return setTimeout(() => setImmediate(() => setImmediate(fire)), ms);
}

/** A deadline being waited for; `clear` forgets it. */
export interface DeadlineTimer {
  clear(): void;
}

/**
 * Calls `fire` once the clock `now` has passed `deadline` (and the I/O that arrived meanwhile
 * has been read). A timer counts from the event loop's cached time, which may be a little behind
 * `now`: it is re-armed until the deadline has really passed, so a script told that deadline
 * never decides after the caller gave up on it.
 */
export function atDeadline(deadline: number, now: () => number, fire: () => void): DeadlineTimer {
  let timer: NodeJS.Timeout;
  const arm = () => {
    timer = afterDeadline(Math.max(0, Math.ceil(deadline - now())), () => {
      if (now() < deadline) arm();
      else fire();
    });
  };
  arm();
  return { clear: () => clearTimeout(timer) };
}

/** `promise`, or a rejection with `onTimeout()` once `now` has passed `deadline` (see atDeadline). */
export function withDeadlineAt<T>(
  promise: Promise<T>,
  deadline: number,
  now: () => number,
  onTimeout: () => Error,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = atDeadline(deadline, now, () => reject(onTimeout()));
    promise.then(
      (value) => {
        timer.clear();
        resolve(value);
      },
      (err: unknown) => {
        timer.clear();
        reject(err);
      },
    );
  });
}

// A promise that rejects with `onTimeout()` unless `promise` settles within `ms`. The timer is
// cleared either way, so a settled call leaves nothing behind in the event loop.
export function withDeadline<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    // A reply read on the deadline's own turn still wins: a promise settles once.
    const timer = afterDeadline(ms, () => reject(onTimeout()));
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
