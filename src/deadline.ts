// Deadlines that are judged after the I/O already received. Each turn of the event loop runs
// its timers before it reads sockets: when the loop lags (a burst of connections, a long
// garbage collection), a reply that arrived in time would lose to its own timer. A deadline
// therefore fires from a timer and decides on the next check phase, after that turn's reads.

/** Calls `fire` once `ms` have passed and the I/O that arrived meanwhile has been read. */
export function afterDeadline(ms: number, fire: () => void): NodeJS.Timeout {
  return setTimeout(() => setImmediate(fire), ms);
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
