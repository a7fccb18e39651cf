/**
 * `HarnessAgent`: the base of every agent the workerd side plays. It counts incarnations,
 * sleeps on the harness's virtual timers, reads the scenario's options for its class, records
 * story notes the way the port's `StoryAgent._note` does (a `story_log` row and a `story:<kind>`
 * record in one turn), and reports every alarm it arms or clears to the harness, which is how
 * the step runner knows when the next alarm is due without waking the object.
 */
import { Agent } from "agents";
import { type Json, now, option, record, shared, sleep, BASE_MS } from "../harness";

/** The scenario's snake_case option keys that are the SDK's static options. */
const STATIC_OPTIONS: Record<string, string> = {
  keep_alive_interval_ms: "keepAliveIntervalMs",
  fiber_recovery_hook_timeout_ms: "fiberRecoveryHookTimeoutMs",
  fiber_recovery_scan_deadline_ms: "fiberRecoveryScanDeadlineMs",
  fiber_recovery_max_age_ms: "fiberRecoveryMaxAgeMs",
  hung_schedule_timeout_seconds: "hungScheduleTimeoutSeconds"
};

const STORY_LOG_DDL =
  "CREATE TABLE IF NOT EXISTS story_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, " +
  "t INTEGER NOT NULL, inc INTEGER NOT NULL, kind TEXT NOT NULL, data TEXT NOT NULL)";

/** JSON with sorted keys and Python's separators, as the port writes `story_log.data`. */
export function pythonJson(value: Json): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(", ")}]`;
  if (typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}: ${pythonJson(value[k])}`).join(", ")}}`;
  }
  return JSON.stringify(value);
}

// biome-ignore lint: the SDK's Agent generics are not needed here
export class HarnessAgent extends Agent<any, any> {
  readonly instanceKey: string;
  readonly incarnation: number;

  static get options(): Record<string, unknown> {
    const result: Record<string, unknown> = {};
    const options = shared().options.get(this.name) ?? {};
    for (const [key, value] of Object.entries(options)) {
      if (key in STATIC_OPTIONS) result[STATIC_OPTIONS[key]] = value;
    }
    return result;
  }

  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env as never);
    const key = ctx.id.toString();
    this.instanceKey = key;
    const state = shared();
    this.incarnation = (state.incarnations.get(key) ?? 0) + 1;
    state.incarnations.set(key, this.incarnation);
    state.live.set(key, true);
    state.activity += 1;
    const storage = ctx.storage as unknown as Record<string, unknown>;
    const setAlarm = ctx.storage.setAlarm.bind(ctx.storage);
    const deleteAlarm = ctx.storage.deleteAlarm.bind(ctx.storage);
    storage.setAlarm = (at: number | Date, options?: unknown) => {
      const ms = typeof at === "number" ? at : at.getTime();
      shared().alarms.set(key, ms - BASE_MS);
      shared().activity += 1;
      return setAlarm(at, options as never);
    };
    storage.deleteAlarm = (options?: unknown) => {
      shared().alarms.set(key, null);
      shared().activity += 1;
      return deleteAlarm(options as never);
    };
    this.ctx.storage.sql.exec(STORY_LOG_DDL);
  }

  /** Sleep `ms` of virtual time (never resolved if this incarnation is evicted first). */
  protected pause(ms: number): Promise<void> {
    return sleep(this.instanceKey, ms);
  }

  protected exec(query: string, ...params: unknown[]): Record<string, Json>[] {
    return [...this.ctx.storage.sql.exec(query, ...params)] as Record<string, Json>[];
  }

  protected opt<T extends Json>(key: string, fallback: T): T {
    return option((this.constructor as { name: string }).name, key, fallback);
  }

  protected note(kind: string, fields: Record<string, Json>): void {
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
