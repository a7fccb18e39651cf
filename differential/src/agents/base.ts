/**
 * `HarnessAgent`: the base of every agent the workerd side plays. It counts incarnations,
 * sleeps on the harness's virtual timers, reads the scenario's options for its class, records
 * story notes the way the port's `StoryAgent._note` does (a `story_log` row and a `story:<kind>`
 * record in one turn), and reports every alarm it arms or clears to the harness, which is how
 * the step runner knows when the next alarm is due without waking the object.
 */
import { Agent } from "agents";
import { type Json, now, option, record, shared, sleep, BASE_MS } from "../harness";
import { trackAgentCalls } from "../sdk-work";
import { startOnce } from "../startup";

/** The scenario's snake_case option keys that are the SDK's static options. */
const STATIC_OPTIONS: Record<string, string> = {
  keep_alive_interval_ms: "keepAliveIntervalMs",
  fiber_recovery_hook_timeout_ms: "fiberRecoveryHookTimeoutMs",
  fiber_recovery_scan_deadline_ms: "fiberRecoveryScanDeadlineMs",
  fiber_recovery_max_age_ms: "fiberRecoveryMaxAgeMs",
  hung_schedule_timeout_seconds: "hungScheduleTimeoutSeconds",
  max_alarm_memory_limit_strikes: "maxAlarmMemoryLimitStrikes",
  agent_tool_reattach_no_progress_timeout_ms: "agentToolReattachNoProgressTimeoutMs",
  agent_tool_reattach_max_window_ms: "agentToolReattachMaxWindowMs",
  detached_max_budget_ms: "detachedMaxBudgetMs",
  detached_no_progress_budget_ms: "detachedNoProgressBudgetMs"
};

const STORY_LOG_DDL =
  "CREATE TABLE IF NOT EXISTS story_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, " +
  "t INTEGER NOT NULL, inc INTEGER NOT NULL, kind TEXT NOT NULL, data TEXT NOT NULL)";

/** Every table of a database with its rows, but SQLite's and workerd's internal ones. */
export function readTables(sql: SqlStorage): Record<string, Record<string, Json>[]> {
  const tables: Record<string, Record<string, Json>[]> = {};
  const names = [...sql.exec("SELECT name FROM sqlite_master WHERE type = 'table'")]
    .map((row) => String(row.name))
    .filter((name) => !name.startsWith("sqlite_") && !name.startsWith("_cf_"));
  for (const name of names) {
    tables[name] = [...sql.exec(`SELECT * FROM "${name}"`)] as Record<string, Json>[];
  }
  return tables;
}

/** JSON with sorted keys and Python's separators, as the port writes `story_log.data`. */
/** Every table of a database, by path below its agent: `""` for its own, `r1`, `r1/g0`, ... */
export type Tables = Record<string, Record<string, Record<string, Json>[]>>;

/** The tables of `agent` and of its sub-agents (each asked through the SDK's own resolution of
 * a sub-agent, so a child is woken as the SDK wakes it). */
async function tablesBelow(agent: unknown, sql: SqlStorage): Promise<Tables> {
  const own = readTables(sql);
  const out: Tables = { "": own };
  const resolve = (agent as {
    _cf_resolveSubAgent(cls: string, name: string): Promise<{ harnessTables(): Promise<Tables> }>;
  })._cf_resolveSubAgent.bind(agent);
  for (const row of own.cf_agents_sub_agents ?? []) {
    const child = await resolve(String(row.class), String(row.name));
    for (const [path, tables] of Object.entries(await child.harnessTables())) {
      out[path ? `${row.name}/${path}` : String(row.name)] = tables;
    }
  }
  return out;
}

export function pythonJson(value: Json): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(", ")}]`;
  if (typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}: ${pythonJson(value[k])}`).join(", ")}}`;
  }
  return JSON.stringify(value);
}

/** The harness's bookkeeping for one incarnation of an agent, whatever SDK class it extends
 * (`withHarness`): count the incarnation, mark it live, report the alarms it arms or clears,
 * and silence its observability events once it is no longer the live incarnation. Returns its
 * number and a function telling whether it still is the live one. */
function harnessed(
  agent: { _emit(type: string, payload?: unknown): void },
  ctx: DurableObjectState
): { incarnation: number; current: () => boolean } {
  const key = ctx.id.toString();
  const state = shared();
  const incarnation = (state.incarnations.get(key) ?? 0) + 1;
  state.incarnations.set(key, incarnation);
  state.live.set(key, true);
  state.activity += 1;
  const storage = ctx.storage as unknown as Record<string, unknown>;
  const setAlarm = ctx.storage.setAlarm.bind(ctx.storage);
  const deleteAlarm = ctx.storage.deleteAlarm.bind(ctx.storage);
  const wrote = (slot: number | null) => {
    shared().alarms.set(key, slot);
    shared().alarmWrites.set(key, (shared().alarmWrites.get(key) ?? 0) + 1);
    shared().activity += 1;
  };
  storage.setAlarm = (at: number | Date, options?: unknown) => {
    wrote((typeof at === "number" ? at : at.getTime()) - BASE_MS);
    return setAlarm(at, options as never);
  };
  storage.deleteAlarm = (options?: unknown) => {
    wrote(null);
    return deleteAlarm(options as never);
  };
  // An evicted incarnation is dead for the port (its tasks never run again), but a JavaScript
  // continuation of it can still run here (a stream of a dead facet erroring out): it must
  // leave no observability event, so the SDK's emitter is silenced once it is not current.
  const current = () =>
    shared().live.get(key) === true && shared().incarnations.get(key) === incarnation;
  const emit = agent._emit.bind(agent);
  agent._emit = (type: string, payload?: unknown) => {
    if (current()) emit(type, payload);
  };
  return { incarnation, current };
}

// biome-ignore lint: the bases are the SDK's Agent and AIChatAgent, typed loosely here
type AgentBase = abstract new (ctx: DurableObjectState, env: unknown) => any;

/** What every player's agent has from the harness, on the SDK class it extends (`Agent` for
 * `HarnessAgent`, `AIChatAgent` for the chat players): one startup per instance (startup.ts,
 * F10), the bookkeeping of its incarnation (`harnessed`), its facet path, its tables, and the
 * helpers a player uses. */
export function withHarness<TBase extends AgentBase>(Base: TBase) {
  abstract class Harnessed extends Base {
    readonly instanceKey: string;
    readonly incarnation: number;
    private readonly isCurrent: () => boolean;

    // biome-ignore lint: the mixin's constructor takes what every agent takes
    constructor(...args: any[]) {
      super(args[0], args[1]);
      const ctx = args[0] as DurableObjectState;
      // Two first calls reaching this instance together must start it once (startup.ts).
      startOnce(this);
      this.instanceKey = ctx.id.toString();
      const { incarnation, current } = harnessed(this as never, ctx);
      this.incarnation = incarnation;
      this.isCurrent = current;
    }

    /** Whether this is the live incarnation of its object (not evicted, not replaced). */
    protected current(): boolean {
      return this.isCurrent();
    }

    /** A player's own trace record (`workload:*`), unless this incarnation is dead. */
    protected trace(type: string, payload: Record<string, Json>): void {
      if (this.current()) record(this.name, type, payload);
    }

    /** A sub-agent tells the harness its path (root-first names), once it knows it: the step
     * runner evicts it through its parent and names its records `root/child`. */
    protected registerFacet(): void {
      const path = (this as unknown as { selfPath?: { name: string }[] }).selfPath;
      if (!path || path.length < 2) return;
      shared().facets.set(this.instanceKey, path.map((step) => step.name).join("/"));
    }

    /** Every table of this agent's database and of its sub-agents', by path below it
     * (`""` for its own, `r1`, `r1/g0`, ...). Not an `async` method: since 0.32.0 the SDK
     * starts a cold agent before an `async` method entered from outside it (its native-RPC
     * wrapper, `withAgentContext`), and the harness's read must not start the agent (the
     * port's read of the tables does not; a startup parked on a virtual-time warm-up would
     * also wait out blockConcurrencyWhile's real-time limit, no clock being advanced). */
    harnessTables(): Promise<Tables> {
      return tablesBelow(this, this.ctx.storage.sql);
    }

    /** Sleep `ms` of virtual time (never resolved if this incarnation is evicted first). */
    protected pause(ms: number): Promise<void> {
      return sleep(this.instanceKey, ms);
    }

    protected exec(query: string, ...params: unknown[]): Record<string, Json>[] {
      return [...this.ctx.storage.sql.exec(query, ...params)] as Record<string, Json>[];
    }

    /** The Durable Object's own name (a root's; a facet's id carries none). */
    protected get doName(): string | null {
      return (this.ctx.id as { name?: string }).name ?? null;
    }

    protected opt<T extends Json>(key: string, fallback: T): T {
      return option((this.constructor as { name: string }).name, key, fallback, this.doName);
    }
  }
  return Harnessed;
}

/** The runtime's `retry` option in the port's spelling -> the SDK's. */
const RETRY_KEYS: Record<string, string> = {
  max_attempts: "maxAttempts",
  base_delay_ms: "baseDelayMs",
  max_delay_ms: "maxDelayMs"
};

/** The SDK's static options among a scenario's options, in the SDK's spelling (`retry` with
 * its fields spelled too). */
function staticOptions(options: Record<string, Json>): Record<string, unknown> {
  const result: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(options)) {
    if (key in STATIC_OPTIONS) result[STATIC_OPTIONS[key]] = value;
  }
  const retry = options.retry;
  if (retry && typeof retry === "object" && !Array.isArray(retry)) {
    const spelled: Record<string, Json> = {};
    for (const [key, value] of Object.entries(retry)) spelled[RETRY_KEYS[key] ?? key] = value;
    result.retry = spelled;
  }
  return result;
}

export class HarnessAgent extends withHarness(Agent) {
  static get options(): Record<string, unknown> {
    return staticOptions(shared().options.get(this.name) ?? {});
  }

  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env);
    // The calls it makes on other agents count as work in flight for the runner (sdk-work.ts).
    trackAgentCalls(this);
    this.ctx.storage.sql.exec(STORY_LOG_DDL);
    const cap = this.opt("max_concurrent_agent_tools", null);
    if (typeof cap === "number") this.maxConcurrentAgentTools = cap;
  }

  protected note(kind: string, fields: Record<string, Json>): void {
    if (!this.current()) return;
    this.exec(
      "INSERT INTO story_log (t, inc, kind, data) VALUES (?, ?, ?, ?)",
      now(),
      this.incarnation,
      kind,
      pythonJson(fields)
    );
    record(this.name, `story:${kind}`, fields);
  }
}

// The SDK resolves its static options from the class (`_resolvedOptions`, once per instance).
// Two agents of one player class may carry different ones in a scenario, as two classes would
// in a user's worker: a root's own static options are laid over its class's here.
const resolvedOptions = Object.getOwnPropertyDescriptor(Agent.prototype, "_resolvedOptions")?.get;
if (!resolvedOptions) throw new Error("the SDK's Agent has no _resolvedOptions to lay options over");
const ownResolved = new WeakMap<object, Record<string, unknown>>();
Object.defineProperty(HarnessAgent.prototype, "_resolvedOptions", {
  configurable: true,
  get(this: HarnessAgent) {
    const cached = ownResolved.get(this);
    if (cached) return cached;
    const base = resolvedOptions.call(this) as Record<string, unknown>;
    const name = (this.ctx.id as { name?: string }).name;
    const own = name === undefined ? undefined : shared().agentOptions.get(name);
    const mine = own ? staticOptions(own) : undefined;
    // A root's own `retry` is laid over the class's field by field, as the SDK resolves it.
    const resolved = mine
      ? {
          ...base,
          ...mine,
          ...(mine.retry
            ? { retry: { ...(base.retry as object), ...(mine.retry as object) } }
            : {})
        }
      : base;
    ownResolved.set(this, resolved);
    return resolved;
  }
});
