// What the checks after the schema read: a config whose failed entries are left out, and what
// failed. Apart from checks.ts so that the checks of each concern (ai-, alert-, header-, key-)
// and the salvage of a failed file name them without importing the checks that use them.
import type { PathSegment } from "./document.js";
import type { ClientConfig, Config, RouteConfig } from "./schema.js";

/** A config whose lists may have holes: the items that did not pass the schema. */
export type CheckableConfig = Omit<Config, "routes" | "clients"> & {
  routes: readonly (RouteConfig | undefined)[];
  clients: readonly (ClientConfig | undefined)[];
};

/** What did not pass the schema, when the checks run on the rest of a file. */
export interface Invalid {
  /** Top-level keys whose value did not validate as a whole: the checks that read them are skipped. */
  sections: ReadonlySet<string>;
  /** Names given by items that did not validate: they exist, so a reference to one is not unknown. */
  names: {
    routes: ReadonlySet<string>;
    plans: ReadonlySet<string>;
    upstreams: ReadonlySet<string>;
    clients: ReadonlySet<string>;
  };
  /** References made by items that did not validate (a failed route's upstream), still checked. */
  references: readonly { path: PathSegment[]; kind: "upstream" | "plan"; name: string }[];
}
