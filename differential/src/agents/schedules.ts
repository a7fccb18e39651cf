/**
 * `ScheduleWorkload`: the player of the `workload: schedules` description on the real SDK, as
 * `scenarios/workloads/schedules.py` plays it in the port. The schedules (`SchedulePlan`s: an
 * interval, a cron expression, a one-shot after a delay or at an absolute time), how they are set
 * up (`on_start` after a warm-up, or a `setup` call) come from the plan's options, as the plan
 * compiler exported them from the port's class, so one scenario file drives both players. Every
 * schedule calls `workload_tick`, which records the attempt, works, fails its first `fail`
 * attempts, and cancels a recurring schedule once its `runs` are done. The tables, rows and
 * `workload:*` records are the port's, field for field.
 */
import type { FiberRecoveryContext } from "agents";
import { type Json, BASE_MS, now } from "../harness";
import { HarnessAgent } from "./base";

interface SchedulePlan {
  name: string;
  every_s: number | null;
  cron: string | null;
  after_s: number | null;
  /** Seconds since the run's epoch (the port's 1970, the real side's `BASE_MS`). */
  at_s: number | null;
  runs: number | null;
  work_ms: number;
  fail: number;
  /** How a failing attempt raises: `error`, or `memory` (the platform's memory-limit reset). */
  fail_as?: string;
  attempts: number | null;
  keep_alive: boolean;
  fiber: boolean;
}

const DDL = [
  "CREATE TABLE IF NOT EXISTS workload_schedules (name TEXT PRIMARY KEY, schedule_id TEXT " +
    "NOT NULL, kind TEXT NOT NULL, created_at INTEGER NOT NULL, cancelled_at INTEGER)",
  "CREATE TABLE IF NOT EXISTS workload_attempts (name TEXT NOT NULL, attempt INTEGER NOT NULL, " +
    "schedule_id TEXT, started_at INTEGER NOT NULL, inc INTEGER NOT NULL, outcome TEXT, " +
    "ended_at INTEGER)"
];

class WorkloadScheduleFailed extends Error {}

/** The platform's message for an isolate reset at its memory limit. */
const MEMORY_LIMIT_RESET = "Durable Object's isolate exceeded its memory limit and was reset.";

/** A plan's `fail_as` -> the platform's message its failing attempts raise. */
const PLATFORM_MESSAGES: Record<string, string> = {
  memory: MEMORY_LIMIT_RESET,
  network: "Network connection lost."
};

/** The row type the runtime writes for a plan: interval, cron, delayed or scheduled. */
function kind(plan: SchedulePlan): string {
  if (plan.every_s !== null) return "interval";
  if (plan.cron !== null) return "cron";
  return plan.after_s !== null ? "delayed" : "scheduled";
}

/** The plan's retry option (`attempts`), or none: the SDK's default. */
function retryOptions(plan: SchedulePlan): { retry: { maxAttempts: number } } | undefined {
  return plan.attempts === null ? undefined : { retry: { maxAttempts: plan.attempts } };
}

function recurring(plan: SchedulePlan): boolean {
  return plan.every_s !== null || plan.cron !== null;
}

export class ScheduleWorkload extends HarnessAgent {
  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env);
    // Here, not in onStart: a plain RPC on a stale stub reaches an instance whose startup has
    // not run, and fiber recovery runs before it (as the port's player says).
    for (const statement of DDL) this.exec(statement);
  }

  private get plans(): SchedulePlan[] {
    return this.opt("schedules", []) as unknown as SchedulePlan[];
  }

  private plan(name: unknown): SchedulePlan | undefined {
    return this.plans.find((plan) => plan.name === name);
  }

  async onStart(): Promise<void> {
    const warmup = this.opt("warmup_ms", 0) as number;
    if (warmup > 0) {
      await this.pause(warmup);
      this.trace("workload:warmed_up", { ms: warmup });
    }
    if (this.opt("setup_on", "on_start") === "on_start") await this.setUp();
  }

  async setup(): Promise<string[]> {
    return this.setUp();
  }

  async status(): Promise<Record<string, Json>> {
    const out: Record<string, Json> = {};
    for (const row of this.exec("SELECT name FROM workload_schedules ORDER BY created_at, name")) {
      const counts = this.exec(
        "SELECT COUNT(*) AS attempts, SUM(outcome = 'done') AS done " +
          "FROM workload_attempts WHERE name = ?",
        row.name
      )[0];
      out[String(row.name)] = { done: Number(counts.done ?? 0), attempts: Number(counts.attempts) };
    }
    return out;
  }

  async cancel(name: string): Promise<boolean> {
    this.named(name);
    return this.cancelNamed(name, "call");
  }

  /** The plan named `name`, or the port's error (Python's spelling of the names included). */
  private named(name: string): SchedulePlan {
    const plan = this.plan(name);
    if (plan) return plan;
    const names = this.plans.map((each) => `'${each.name}'`).join(", ");
    throw new Error(`no schedule named '${name}'; this workload's schedules: [${names}]`);
  }

  /** Cancel the schedule `name` (if it is still there) and create it again, as a new row;
   * whether there was one to cancel (the port's `recreate`). */
  async recreate(name: string): Promise<boolean> {
    const plan = this.named(name);
    const cancelled = await this.cancelNamed(name, "recreate");
    this.exec("DELETE FROM workload_schedules WHERE name = ?", name);
    await this.setUpOne(plan);
    return cancelled;
  }

  /** `scheduleEvery(seconds)` once more with the interval schedule `name`'s callback and
   * payload (the port's `every_again`): another interval is another row, the same one answers
   * the row there already; whether the row answered is another than the one recorded. */
  async every_again(name: string, seconds: number): Promise<boolean> {
    const plan = this.named(name);
    if (plan.every_s === null) {
      throw new Error(
        `schedule '${name}' is a ${kind(plan)} schedule; every_again takes an interval one`
      );
    }
    if (!Number.isInteger(seconds) || seconds < 1) {
      throw new Error(`every_again takes whole seconds, at least 1; got ${seconds}`);
    }
    const callback = "workload_tick" as never;
    const schedule = await this.scheduleEvery(seconds, callback, { name }, retryOptions(plan));
    this.trace("workload:scheduled", {
      name,
      scheduleId: schedule.id,
      kind: "interval",
      every: seconds
    });
    const recorded = this.exec("SELECT schedule_id FROM workload_schedules WHERE name = ?", name);
    return !recorded.length || String(recorded[0].schedule_id) !== String(schedule.id);
  }

  async onRequest(request: Request): Promise<Response> {
    if (request.method === "GET") return Response.json(await this.status());
    return new Response(`method ${request.method} not allowed; use GET`, { status: 405 });
  }

  private async setUp(): Promise<string[]> {
    const created: string[] = [];
    for (const plan of this.plans) {
      if (this.exec("SELECT 1 AS x FROM workload_schedules WHERE name = ?", plan.name).length) {
        continue;
      }
      await this.setUpOne(plan);
      created.push(plan.name);
    }
    return created;
  }

  private async setUpOne(plan: SchedulePlan): Promise<void> {
    const schedule = await this.create(plan);
    this.exec(
      "INSERT INTO workload_schedules (name, schedule_id, kind, created_at) VALUES (?, ?, ?, ?)",
      plan.name,
      schedule.id,
      kind(plan),
      now()
    );
    this.trace("workload:scheduled", { name: plan.name, scheduleId: schedule.id, kind: kind(plan) });
  }

  private async create(plan: SchedulePlan): Promise<{ id: string }> {
    const payload = { name: plan.name };
    const options = retryOptions(plan);
    const callback = "workload_tick" as never;
    if (plan.every_s !== null) return this.scheduleEvery(plan.every_s, callback, payload, options);
    if (plan.cron !== null) return this.schedule(plan.cron, callback, payload, options);
    const when = plan.at_s !== null ? new Date(BASE_MS + plan.at_s * 1000) : (plan.after_s as number);
    // Idempotent: a setup cut short and run again finds the row it wrote.
    return this.schedule(when, callback, payload, { retry: options?.retry, idempotent: true });
  }

  /** Cancel the schedule `name`; `running`: the id of the row whose callback runs now,
   * cancelled even when no record names it (a row `every_again` made, or one a setup wrote
   * before it could record it), as the port's player does. */
  private async cancelNamed(name: string, by: string, running?: string): Promise<boolean> {
    const rows = this.exec(
      "SELECT schedule_id FROM workload_schedules WHERE name = ? AND cancelled_at IS NULL",
      name
    );
    const recorded = this.exec("SELECT schedule_id FROM workload_schedules WHERE name = ?", name);
    if (running !== undefined && recorded.every((r) => String(r.schedule_id) !== running)) {
      const cancelled = await this.cancelSchedule(running);
      this.trace("workload:schedule_cancelled", { name, by, found: cancelled });
      if (!rows.length) return cancelled;
    }
    if (!rows.length) return false;
    // The cancel first: one that fails must leave the name uncancelled (the port's order).
    const cancelled = await this.cancelSchedule(String(rows[0].schedule_id));
    this.exec("UPDATE workload_schedules SET cancelled_at = ? WHERE name = ?", now(), name);
    this.trace("workload:schedule_cancelled", { name, by, found: cancelled });
    return cancelled;
  }

  /** Every schedule's callback: one attempt of the run of `payload.name`. */
  async workload_tick(payload: { name?: string } | null, row?: { id?: string }): Promise<void> {
    const name = payload?.name;
    const plan = this.plan(name);
    if (!plan || name === undefined) return;
    const attempt =
      Number(this.exec("SELECT COUNT(*) AS n FROM workload_attempts WHERE name = ?", name)[0].n) + 1;
    this.exec(
      "INSERT INTO workload_attempts (name, attempt, schedule_id, started_at, inc) " +
        "VALUES (?, ?, ?, ?, ?)",
      name,
      attempt,
      row?.id ?? null,
      now(),
      this.incarnation
    );
    this.trace("workload:schedule_run", { name, attempt });
    const work = async () => {
      if (plan.work_ms > 0) await this.pause(plan.work_ms);
      if (attempt <= plan.fail) {
        this.ended(name, attempt, "failed");
        const platform = PLATFORM_MESSAGES[plan.fail_as ?? ""];
        if (platform !== undefined) {
          this.trace("workload:schedule_failed", { name, attempt, fail_as: plan.fail_as ?? "" });
          throw new WorkloadScheduleFailed(platform);
        }
        this.trace("workload:schedule_failed", { name, attempt });
        throw new WorkloadScheduleFailed(
          `schedule ${name} failed its attempt ${attempt} (fail: ${plan.fail})`
        );
      }
      this.ended(name, attempt, "done");
      this.trace("workload:schedule_done", { name, attempt });
    };
    const inFiber = async () => {
      if (plan.fiber) await this.runFiber(name, () => work());
      else await work();
    };
    if (plan.keep_alive) await this.keepAliveWhile(inFiber);
    else await inFiber();
    if (recurring(plan) && plan.runs !== null) {
      const done = Number(
        this.exec(
          "SELECT COUNT(*) AS n FROM workload_attempts WHERE name = ? AND outcome = 'done'",
          name
        )[0].n
      );
      if (done >= plan.runs) await this.cancelNamed(name, "runs", row?.id);
    }
  }

  private ended(name: string, attempt: number, outcome: string): void {
    this.exec(
      "UPDATE workload_attempts SET outcome = ?, ended_at = ? WHERE name = ? AND attempt = ?",
      outcome,
      now(),
      name,
      attempt
    );
  }

  override async onFiberRecovered(ctx: FiberRecoveryContext) {
    if (!this.plan(ctx.name)) return super.onFiberRecovered(ctx);
    // The schedule itself runs the work again (a one-shot row is kept until its callback
    // returns; a recurring one comes round), so the interrupted fiber is let go.
    this.trace("workload:schedule_fiber_dropped", { name: ctx.name, fiberId: ctx.id });
    return undefined;
  }
}
