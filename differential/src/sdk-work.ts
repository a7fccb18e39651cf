/**
 * The work agents start on one another by themselves, counted as work in flight for the step
 * runner's quiet-period check (`test/support.ts`): every call a parent makes on a sub-agent's
 * stub (`_cf_resolveSubAgent`, with its `_cf_initAsFacet` handshake) and every call a
 * sub-agent makes on its root (`_rootAlarmOwner`), from the moment it is sent until it
 * answers.
 *
 * Such a call crosses between two Durable Objects, which takes real time that no record, timer
 * or alarm change marks. A wait used to end on 30 ms of quiet alone, so on a loaded machine it
 * could end while one was on its way: in `reattach-after-parent-restart` the parent's re-attach
 * asks the finished child for its terminal (`inspectAgentToolRun`) at 700 ms, and in some plays
 * the runner moved the clock to the end before the answer came back, so the run finished at
 * 5 s instead of 700 ms. A wait now also ends only once no such call is on its way, unless it
 * waits on virtual time: a call during which a virtual timer was created since it was sent
 * (a sleep, an SDK timeout) is parked there, as the runner's own calls are.
 */
import { shared } from "./harness";

interface Hop {
  /** `shared().order` (virtual timers created so far) when the call was sent. */
  order: number;
  /** The play's record list when it was sent (`resetRun` starts a new one for every play): a
   * call a past play left unanswered never holds a later play's wait. */
  play: unknown[];
}

const HOPS_KEY = "__agentsimSdkHops";

/** The calls on their way (one set for every module graph that loads this file). */
function hops(): Set<Hop> {
  const holder = globalThis as unknown as Record<string, Set<Hop>>;
  holder[HOPS_KEY] ??= new Set();
  return holder[HOPS_KEY];
}

/** Whether a call between two agents is on its way and not parked on virtual time. */
export function callsInFlight(): boolean {
  const state = shared();
  let found = false;
  for (const hop of hops()) {
    if (hop.play !== state.records) hops().delete(hop);
    else if (hop.order === state.order) found = true;
  }
  return found;
}

/** Count `value` (a promise or an RPC promise) as a call on its way until it settles. */
function track<T>(value: T): T {
  const hop: Hop = { order: shared().order, play: shared().records };
  hops().add(hop);
  shared().activity += 1;
  const done = () => {
    hops().delete(hop);
    shared().activity += 1;
  };
  Promise.resolve(value).then(done, done);
  return value;
}

/** `stub` with every method call counted while on its way. Property access on an RPC stub
 * yields callables (never `then`, so a stub is no thenable); each is called through
 * `Reflect.apply`, as a property named `apply` would be another remote call. */
function trackedStub<T extends object>(stub: T): T {
  return new Proxy(stub, {
    get(target, prop) {
      const value = (target as Record<string | symbol, unknown>)[prop];
      if (typeof prop !== "string" || prop === "then" || typeof value !== "function") return value;
      return (...args: unknown[]) => track(Reflect.apply(value as () => unknown, target, args));
    }
  });
}

interface Resolving {
  _cf_resolveSubAgent(className: string, name: string): Promise<object>;
  _rootAlarmOwner(): Promise<object>;
}

/** Count the calls `agent` makes on its sub-agents and on its root. Call it after the SDK's
 * constructor. */
export function trackAgentCalls(agent: object): void {
  const holder = agent as Resolving;
  const resolve = holder._cf_resolveSubAgent?.bind(agent);
  if (resolve) {
    holder._cf_resolveSubAgent = async (className: string, name: string) =>
      trackedStub(await track(resolve(className, name)));
  }
  const root = holder._rootAlarmOwner?.bind(agent);
  if (root) holder._rootAlarmOwner = async () => trackedStub(await track(root()));
}
