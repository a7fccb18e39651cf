/**
 * The library agents of the fiber stories (`scenarios/library_agents/fibers.py` in the port),
 * played on the real SDK: the research fiber that checkpoints every step (and its poisoned and
 * slow-recovery variants), the batch job inline in an alarm handler, the webhook receiver that
 * accepts managed fibers by idempotency key (and its strict variant), the cancellable export
 * and the cron digest. Each does what its port does, note for note, so that the two sides'
 * `story:*` records and `story_log` rows can be compared one to one.
 */
import type { FiberContext, FiberRecoveryContext } from "agents";
import { type Json, now } from "../harness";
import { HarnessAgent } from "./base";

type Results = Record<string, string>;

export class Researcher extends HarnessAgent {
  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env);
    this.exec("CREATE TABLE IF NOT EXISTS steps (step TEXT NOT NULL, at INTEGER NOT NULL)");
    this.exec("CREATE TABLE IF NOT EXISTS resumes (pending INTEGER, at INTEGER NOT NULL)");
  }

  protected get plannedSteps(): string[] {
    return this.opt("steps", ["search", "analyze", "synthesize"]) as string[];
  }

  async research(topic: string): Promise<void> {
    this.spawn(topic, [], {}, [...this.plannedSteps]);
  }

  /** The steps done so far (an async method a dashboard calls over RPC). */
  async progress(): Promise<string[]> {
    const done = this.exec("SELECT step FROM steps ORDER BY at").map((row) => String(row.step));
    this.note("progress", { done });
    return done;
  }

  async research_later(delayS: number, topic: string): Promise<void> {
    await this.schedule(delayS, "begin_scheduled" as never, { topic });
  }

  async begin_scheduled(payload: { topic: string }): Promise<void> {
    await this.research(payload.topic);
  }

  protected spawn(topic: string, completed: string[], results: Results, pending: string[]): void {
    const stepMs = this.opt("step_ms", 10_000) as number;
    const steps = async (ctx: FiberContext): Promise<void> => {
      for (let index = 0; index < pending.length; index++) {
        const step = pending[index];
        await this.pause(stepMs);
        results[step] = `${step} of ${topic}`;
        completed.push(step);
        this.exec("INSERT INTO steps VALUES (?, ?)", step, now());
        this.note("step", { step });
        ctx.stash({
          topic,
          completed,
          results,
          pendingSteps: pending.slice(index + 1)
        });
      }
      this.setState({ topic, result: results });
      this.note("finished", { steps: completed.length });
    };
    void this.runFiber("research", steps).catch(() => undefined);
  }

  override async onFiberRecovered(ctx: FiberRecoveryContext): Promise<void> {
    if (ctx.name !== "research") return super.onFiberRecovered(ctx) as Promise<void>;
    const snapshot = (ctx.snapshot ?? {}) as {
      topic?: string;
      completed?: string[];
      results?: Results;
      pendingSteps?: string[];
    };
    const pending = snapshot.pendingSteps ?? [...this.plannedSteps];
    this.exec("INSERT INTO resumes VALUES (?, ?)", pending.length, now());
    this.note("recovered", { completed: snapshot.completed ?? [], pending });
    if (pending.length > 0) {
      this.spawn(
        snapshot.topic ?? "?",
        [...(snapshot.completed ?? [])],
        { ...(snapshot.results ?? {}) },
        [...pending]
      );
    }
  }
}

export class PoisonedResearcher extends Researcher {
  private lastAttemptMs: number | null = null;
  private lastGapMs: number | null = null;

  override async onFiberRecovered(ctx: FiberRecoveryContext): Promise<void> {
    const at = now();
    const gap = this.lastAttemptMs === null ? null : at - this.lastAttemptMs;
    const cap = this.opt("backoff_cap_ms", 300_000) as number;
    let backoff: string;
    if (gap === null) backoff = "first";
    else if (gap === 0) backoff = "same-wake";
    else if (this.lastGapMs === null || this.lastGapMs === 0 || gap > this.lastGapMs)
      backoff = "grew";
    else if (gap === cap) backoff = "capped";
    else backoff = gap === this.lastGapMs ? "flat" : "shrank";
    this.lastAttemptMs = at;
    if (gap) this.lastGapMs = gap;
    this.note("hook-attempt", { backoff, age_ms: at - (ctx.createdAt - baseOf()) });
    throw new Error(`cannot recover ${ctx.name}: the upstream rejects this input`);
  }
}

function baseOf(): number {
  return Date.now() - now();
}

export class SlowRecoveryResearcher extends Researcher {
  override async onFiberRecovered(ctx: FiberRecoveryContext): Promise<void> {
    await this.pause(this.opt("recover_ms", 4_000) as number);
    return super.onFiberRecovered(ctx);
  }
}

export class Batcher extends HarnessAgent {
  async plan(delayS: number): Promise<void> {
    await this.schedule(delayS, "run_batches" as never);
  }

  async run_batches(): Promise<void> {
    this.exec("CREATE TABLE IF NOT EXISTS batches (n INTEGER, at INTEGER, inc INTEGER)");
    const done = Number(this.exec("SELECT count(*) AS n FROM batches")[0].n);
    this.note("handler-start", { resume_from: done });
    const batches = this.opt("batches", 20) as number;
    for (let n = done; n < batches; n++) {
      await this.pause(this.opt("batch_ms", 60_000) as number);
      this.exec("INSERT INTO batches VALUES (?, ?, ?)", n, now(), this.incarnation);
      this.note("batch", { n });
    }
    this.note("handler-done", { batches });
  }
}

export class Webhooks extends HarnessAgent {
  async onRequest(request: Request): Promise<Response> {
    const body = (await request.json()) as { webhookId: string; threadId: string };
    const { webhookId, threadId } = body;
    const replyMs = this.opt("reply_ms", 5_000) as number;
    const receipt = await this.startFiber(
      "reply-to-webhook",
      async (ctx) => {
        ctx.stash({ webhookId, threadId });
        await this.pause(replyMs);
        this.note("reply", { thread: threadId, via: "live" });
      },
      { idempotencyKey: `webhook:${webhookId}`, metadata: { threadId } }
    );
    this.note("receipt", { accepted: receipt.accepted, status: receipt.status });
    return Response.json(receipt, { status: receipt.accepted ? 202 : 200 });
  }

  override async onFiberRecovered(ctx: FiberRecoveryContext) {
    if (ctx.name !== "reply-to-webhook") return super.onFiberRecovered(ctx);
    const snapshot = (ctx.snapshot ?? {}) as Record<string, Json>;
    this.note("reply", { thread: snapshot.threadId ?? null, via: "recovery" });
    return { status: "completed" as const, snapshot: { ...snapshot, recovered: true } };
  }
}

export class StrictWebhooks extends Webhooks {
  override async onFiberRecovered(_ctx: FiberRecoveryContext): Promise<never> {
    throw new Error("the chat API is unavailable during recovery");
  }

  override async onRequest(request: Request): Promise<Response> {
    const response = await super.onRequest(request);
    const receipt = (await response.clone().json()) as {
      status: string;
      fiberId: string;
      metadata?: { threadId?: string };
      error?: string;
    };
    if (receipt.status === "interrupted") {
      const thread = receipt.metadata?.threadId ?? null;
      this.note("reply", {
        thread,
        via: "duplicate",
        seen_error: receipt.error ?? null
      });
      const resolved = await this.resolveFiber(receipt.fiberId, { status: "completed" });
      this.note("resolved", { resolved });
    }
    return response;
  }
}

export class Exporter extends HarnessAgent {
  async start_export(key: string): Promise<Json> {
    const parts = this.opt("parts", 6) as number;
    const partMs = this.opt("part_ms", 20_000) as number;
    const receipt = await this.startFiber(
      "export",
      async (ctx) => {
        for (let part = 0; part < parts; part++) {
          await this.pause(partMs);
          if (ctx.signal.aborted) {
            this.note("export-stopped", { key, before_part: part });
            return;
          }
          this.note("part", { key, n: part });
          ctx.stash({ parts: part + 1 });
        }
        this.note("published", { key });
      },
      { idempotencyKey: key }
    );
    this.note("receipt", { key, accepted: receipt.accepted, status: receipt.status });
    return JSON.parse(JSON.stringify(receipt)) as Json;
  }

  async cancel_export(key: string, reason = "no longer needed"): Promise<boolean> {
    const cancelled = await this.cancelFiberByKey(key, reason);
    this.note("cancel", { key, cancelled });
    return cancelled;
  }

  override async onFiberRecovered(ctx: FiberRecoveryContext): Promise<void> {
    this.note("recovered", { key: ctx.idempotencyKey ?? null, status: ctx.status ?? null });
  }
}

export class Digest extends HarnessAgent {
  async setup(): Promise<string> {
    const schedule = await this.schedule(
      this.opt("cron", "*/10 * * * *") as string,
      "digest" as never
    );
    return schedule.type;
  }

  async digest(): Promise<void> {
    this.exec("CREATE TABLE IF NOT EXISTS digests (minute INTEGER, inc INTEGER)");
    const minute = Math.floor(now() / 60_000);
    this.exec("INSERT INTO digests VALUES (?, ?)", minute, this.incarnation);
    this.note("digest", { minute });
  }
}
