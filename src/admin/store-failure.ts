// A store that fails an admin read or reset is not the gateway's fault: the request is answered
// 503 store-unavailable, described in the operator's words (observability/store-errors.ts),
// never with the store client's own text.
import { ProblemError } from "./reply.js";

/** Runs store work; its failure becomes a ProblemError the router answers as a 503. */
export type FromStore = <T>(work: () => Promise<T>) => Promise<T>;

export function fromStoreDescribedBy(describe: (err: unknown) => string): FromStore {
  return (work) =>
    // Through a promise, so a `work` that throws before returning one is caught the same way.
    Promise.resolve()
      .then(work)
      .catch((err: unknown) => {
        throw new ProblemError("store_unavailable", describe(err));
      });
}
