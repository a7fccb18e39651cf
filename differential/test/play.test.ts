/**
 * The generic step runner: plays each plan of `PLANS` (a JSON text binding the vitest config
 * reads from the file `agentsim diff` wrote) on the real SDK in workerd, `repeat` times, and
 * hands each play's records and final tables to the reporter through the test's `meta`.
 *
 * A plan is a list of timed actions the Python side compiled from a scenario and its agentsim
 * run: calls, requests, evictions (scripted ones and those the simulator drew by itself) and
 * alarm snapshots. Between two actions the runner moves virtual time forward, firing the agent
 * sleeps and armed alarms that fall due in time order, each followed by a quiet-period wait
 * (no record, timer or alarm change for a few real milliseconds) instead of a fixed sleep.
 */
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { getAgentByName } from "agents";
import { describe, it } from "vitest";
import {
  type Json,
  type TraceRecord,
  dropTimers,
  fireTimer,
  installVirtualDate,
  installVirtualTimers,
  nextTimer,
  record,
  resetRun,
  shared,
  subscribeChannels
} from "../src/harness";
import type { HarnessAgent } from "../src/agents/base";
import { type Draw, installSeededJitter, jitterNotes, loadDraws } from "../src/jitter";
import { RESET_PREFIX, errorValue, inFlight, kebab, settle } from "./support";

interface AgentPlan {
  class: string;
  options: Record<string, Json>;
}

interface Action {
  t: number;
  step?: number;
  do: "call" | "request" | "evict" | "snapshot" | "connect" | "disconnect" | "send";
  client?: string;
  message?: Json;
  code?: number;
  reason?: string;
  agent?: string;
  /** With `evict`: the sub-agent of `agent` to evict (its class and name), not the agent. */
  child?: string;
  child_class?: string;
  method?: string;
  args?: Json[];
  wait?: boolean;
  http_method?: string;
  path?: string;
  body?: Json;
  headers?: Record<string, string>;
  label?: string;
  /** With `evict`: why the port's incarnation ended (`deploy`, `idle`, `explicit`). */
  reason?: string;
  /** With a call not waited for: the alarm snapshot of its step, taken as soon as it is sent. */
  snapshot?: string;
  /** The port ran until this step's time first (`at:`/`after:`): the snapshot's alarms are
   * those that pending work left, not those before the instant's first call. */
  settled?: boolean;
}

interface Plan {
  name: string;
  /** The platform's retry of an alarm handler that did not complete (it threw, or its
   * incarnation ended under it): after `base_ms`, doubling, at most `limit` times. workerd's
   * test pool runs an alarm once and retries nothing, so the runner does what the platform
   * would, with the port's constants (`sim/alarms.py`). */
  alarm_retry: { base_ms: number; limit: number };
  repeat: number;
  end_ms: number;
  agents: Record<string, AgentPlan>;
  actions: Action[];
  /** The port's retry jitter fractions, in draw order (`scenarios/diff/jitter.py`). */
  jitter?: Draw[];
  /** The scenario's scripted model services (`scenarios/diff/model_plan.py`). */
  models?: Record<string, Json>;
}

interface PlayResult {
  records: TraceRecord[];
  tables: Record<string, Record<string, Record<string, Json>[]>>;
  errors: string[];
}

type Stub = DurableObjectStub & Record<string, (...args: unknown[]) => Promise<unknown>>;

class Player {
  private readonly stubs = new Map<string, Stub>();
  private readonly keys = new Map<string, string>();
  private readonly clients = new Map<string, WebSocket>();
  /** DO id (hex) -> the platform's pending retry of its alarm handler. */
  private readonly retries = new Map<string, { due: number; attempt: number }>();
  private readonly unawaited: { step: number; alias: string; ok: boolean | null; error?: Json }[] = [];
  readonly errors: string[] = [];

  constructor(
    private readonly plan: Plan,
    private readonly suffix: string
  ) {}

  doName(alias: string): string {
    return `${alias}${this.suffix}`;
  }

  private namespace(alias: string): DurableObjectNamespace {
    const agent = this.plan.agents[alias];
    if (!agent) throw new Error(`plan ${this.plan.name}: no agent ${alias}`);
    const binding = (env as unknown as Record<string, DurableObjectNamespace>)[agent.class];
    if (!binding) throw new Error(`plan ${this.plan.name}: no binding for class ${agent.class}`);
    return binding;
  }

  /** The stub of `alias`, got once (`getAgentByName` runs startup, as the port's `get`). */
  private async stub(alias: string): Promise<Stub> {
    let stub = this.stubs.get(alias);
    if (!stub) {
      const namespace = this.namespace(alias);
      this.keys.set(alias, namespace.idFromName(this.doName(alias)).toString());
      stub = await this.started(alias, namespace);
      this.stubs.set(alias, stub);
    }
    return stub;
  }

  /** Alias -> its startup, while that startup is parked on virtual time. */
  private readonly starting = new Map<string, Promise<void>>();

  /** `getAgentByName`'s stub, once its startup finished, or once that startup is parked on a
   * virtual sleep (an `onStart` that awaits a warm-up): the runner must go on moving time for
   * it to end, and calls sent meanwhile wait at the object's input gate, as in the port. */
  private async started(alias: string, namespace: DurableObjectNamespace): Promise<Stub> {
    const since = shared().order;
    const pending = getAgentByName(namespace as never, this.doName(alias));
    const entry = { timerSeq: shared().seq };
    inFlight.add(entry);
    let done = false;
    const finished = pending.then(
      () => {
        done = true;
        inFlight.delete(entry);
      },
      () => {
        done = true;
        inFlight.delete(entry);
      }
    );
    // Parked: quiet, with a sleep of this very object's begun since (another agent's sleep
    // during a slow startup is no sign that this one waits on virtual time).
    const key = namespace.idFromName(this.doName(alias)).toString();
    const parked = () => shared().timers.some((t) => t.owner === key && t.order > since);
    while (!done) {
      await Promise.race([finished, settle()]);
      if (!done && parked()) break;
    }
    if (done) return (await pending) as unknown as Stub;
    this.starting.set(alias, finished);
    void finished.then(() => this.starting.delete(alias));
    void pending.catch((error: unknown) => {
      this.errors.push(`startup of ${alias}: ${String(error)}`);
    });
    return namespace.get(namespace.idFromName(this.doName(alias))) as Stub;
  }

  private keyAlias(key: string): string | undefined {
    for (const [alias, k] of this.keys) if (k === key) return alias;
    return undefined;
  }

  /** Fire timers and alarms due at or before `t`, earliest first; `stop` ends it early. */
  async advanceTo(t: number, stop?: () => boolean): Promise<void> {
    const state = shared();
    for (;;) {
      if (stop?.()) return;
      const timer = nextTimer();
      let alarmKey: string | null = null;
      let alarmAt = Number.POSITIVE_INFINITY;
      for (const [key, at] of state.alarms) {
        if (at !== null && at < alarmAt && this.keyAlias(key) !== undefined) {
          alarmAt = at;
          alarmKey = key;
        }
      }
      let retryKey: string | null = null;
      let retryAt = Number.POSITIVE_INFINITY;
      for (const [key, retry] of this.retries) {
        if (retry.due < retryAt && !this.handling.has(key)) {
          retryAt = retry.due;
          retryKey = key;
        }
      }
      let heldKey: string | null = null;
      let heldAt = Number.POSITIVE_INFINITY;
      for (const [key, at] of this.held) {
        if (this.writesOf(key) !== this.heldWrites.get(key)) {
          // The slot was written since it came due: that due is gone (the slot holds one time).
          this.held.delete(key);
          continue;
        }
        if (at !== null && at < heldAt) {
          heldAt = at;
          heldKey = key;
        }
      }
      const timerAt = timer ? timer.due : Number.POSITIVE_INFINITY;
      const due = Math.min(timerAt, alarmAt, retryAt, heldAt);
      if (due > t) break;
      state.now = Math.max(state.now, due);
      if (heldKey !== null && heldAt < Math.min(timerAt, alarmAt, retryAt)) {
        // The slot came due while a handler ran: it fires now that the handler is over.
        this.held.delete(heldKey);
        const alias = this.keyAlias(heldKey) as string;
        const key = heldKey;
        const run = runDurableObjectAlarm(await this.stub(alias));
        this.handle(key, run);
        this.track(run, `held alarm of ${alias}`, (ok) => {
          if (!ok) this.retryAlarm(key, 0);
        });
      } else if (alarmKey !== null && this.handling.has(alarmKey) && alarmAt <= Math.min(timerAt, retryAt)) {
        // Due while its handler runs: the slot is taken now and fires when the handler ends,
        // unless the agent writes the slot again before then.
        state.alarms.set(alarmKey, null);
        this.held.set(alarmKey, null);
        this.heldWrites.set(alarmKey, this.writesOf(alarmKey));
        state.activity += 1;
      } else if (retryKey !== null && retryAt <= alarmAt && retryAt <= timerAt) {
        // A retry runs the handler again without touching the slot, as the platform's does.
        const retry = this.retries.get(retryKey) as { due: number; attempt: number };
        this.retries.delete(retryKey);
        this.held.delete(retryKey); // a due held behind the last handler is served by this run
        const alias = this.keyAlias(retryKey) as string;
        const stub = await this.stub(alias);
        const run = runInDurableObject(stub, async (instance: unknown) => {
          await (instance as { alarm(info: unknown): Promise<void> }).alarm({
            retryCount: retry.attempt,
            isRetry: true
          });
        });
        this.handle(retryKey, run);
        this.track(run, `alarm retry ${retry.attempt} of ${alias}`, (ok) => {
          if (!ok) this.retryAlarm(retryKey as string, retry.attempt);
        });
      } else if (timer && timerAt < alarmAt) {
        fireTimer(timer);
      } else if (alarmKey !== null) {
        // The alarm is taken at its instant, then the sleeps due at that same instant go on
        // before its handler runs (in the port the handler's delivery begins one hop later):
        // a sleeper that re-arms the slot then (a released keepAlive) cannot push it away.
        state.alarms.set(alarmKey, null);
        for (let same = nextTimer(); same !== null && same.due <= alarmAt; same = nextTimer()) {
          fireTimer(same);
          await settle();
        }
        const alias = this.keyAlias(alarmKey) as string;
        const stub = await this.stub(alias);
        const key = alarmKey;
        this.held.delete(key); // a due held behind the last handler is served by this run
        const run = runDurableObjectAlarm(stub);
        this.handle(key, run);
        this.track(run, `alarm of ${alias}`, (ok) => {
          if (!ok) this.retryAlarm(key, 0);
        });
      }
      await settle();
    }
    state.now = Math.max(state.now, t);
  }

  /** DO ids (hex) whose alarm handler is running: as on the platform, two handlers of one
   * object never overlap, so a slot or a retry that comes due meanwhile fires when it ends. */
  private readonly handling = new Set<string>();
  /** DO id -> a slot that came due while its handler ran: null until that handler is over,
   * then the instant it ended, when the slot fires (as `sim/alarms.py` holds it). */
  private readonly held = new Map<string, number | null>();
  /** DO id -> its slot's write count when the held due came due. */
  private readonly heldWrites = new Map<string, number>();

  private writesOf(key: string): number {
    return shared().alarmWrites.get(key) ?? 0;
  }

  private handle(key: string, run: Promise<unknown>): void {
    this.handling.add(key);
    const over = () => {
      this.handling.delete(key);
      if (this.held.has(key)) this.held.set(key, shared().now);
      shared().activity += 1;
    };
    void run.then(over, over);
  }

  /** The handler run `attempt` (0: the slot's own) did not complete: the platform retries
   * it after 2 s doubling, until its sixth retry. */
  private retryAlarm(key: string, attempt: number): void {
    const { base_ms, limit } = this.plan.alarm_retry;
    if (attempt >= limit) return;
    const due = shared().now + base_ms * 2 ** attempt;
    this.retries.set(key, { due, attempt: attempt + 1 });
    shared().activity += 1;
  }

  private track(
    promise: Promise<unknown>,
    what: string,
    reply?: (ok: boolean, value: unknown, error?: unknown) => void,
    gate?: Promise<unknown>
  ): { done: boolean } {
    const status = { done: false };
    const entry = { timerSeq: shared().seq };
    if (gate) {
      // Held at the input gate of a startup parked on virtual time: not working until the
      // startup ends (then it is, until it parks or finishes in its turn).
      entry.timerSeq = -1;
      void gate.then(() => {
        entry.timerSeq = shared().seq;
        shared().activity += 1;
      });
    }
    inFlight.add(entry);
    shared().activity += 1;
    void promise.then(
      (value: unknown) => {
        status.done = true;
        inFlight.delete(entry);
        shared().activity += 1;
        reply?.(true, value);
      },
      (error: unknown) => {
        status.done = true;
        inFlight.delete(entry);
        shared().activity += 1;
        this.errors.push(`${what}: ${String(error)}`);
        reply?.(false, null, error);
      }
    );
    return status;
  }

  async perform(action: Action): Promise<void> {
    const alias = action.agent as string;
    if (!action.snapshot || action.settled) this.sentAt = null;
    const before = action.snapshot ? this.alarmsBeforeSending(action.t) : null;
    if (action.do === "snapshot") {
      this.snapshot(action.label ?? null);
      return;
    }
    if (action.do === "evict" && action.child) {
      await this.evictChild(alias, action.child_class as string, action.child, action.reason);
      return;
    }
    if (action.do === "evict") {
      const stub = this.stubs.get(alias);
      const key = this.keys.get(alias);
      if (stub && key && shared().live.get(key)) {
        // Kill, never unwind: the instance is reset at once (in-flight calls fail), and its
        // pending sleeps never fire. `evictDurableObject` would wait for in-flight work.
        dropTimers(key);
        shared().live.set(key, false);
        // Its sub-agents die with it (facets live in their root's isolate).
        for (const facet of this.facetKeys(alias)) {
          dropTimers(facet);
          shared().live.set(facet, false);
        }
        try {
          const reason = `${RESET_PREFIX}${action.reason ?? "explicit"}`;
          await runInDurableObject(stub, (instance: unknown, state) => {
            // Its sub-agents first, so that none outlives it by a moment.
            const root = instance as {
              abortSubAgent(cls: { name: string }, name: string, reason: unknown): void;
            };
            let children: Record<string, SqlStorageValue>[] = [];
            try {
              children = [...state.storage.sql.exec("SELECT class, name FROM cf_agents_sub_agents")];
            } catch {
              // an agent without the registry has no sub-agents
            }
            for (const row of children) {
              try {
                root.abortSubAgent({ name: String(row.class) }, String(row.name), new Error(reason));
              } catch {
                // not running
              }
            }
            state.abort(reason);
          });
        } catch {
          // abort() throws to unwind the call that asked for it
        }
        // A stub of an aborted object stays broken; callers of the real platform hold a stub
        // obtained before the eviction, whose next call is a plain RPC (no startup): a plain
        // `get` stub is that.
        const namespace = this.namespace(alias);
        this.stubs.set(alias, namespace.get(namespace.idFromName(this.doName(alias))) as Stub);
      }
      return;
    }
    if (action.do === "disconnect" || action.do === "send") {
      const socket = this.clients.get(action.client as string);
      if (!socket) {
        this.errors.push(`${action.do} ${action.client}: the client is not connected`);
      } else if (action.do === "send") {
        const message = action.message;
        socket.send(typeof message === "string" ? message : JSON.stringify(message));
      } else {
        this.clients.delete(action.client as string);
        socket.close(action.code ?? 1000, action.reason ?? "client closed");
      }
      return;
    }
    const stub = await this.stub(alias);
    if (action.do === "connect") {
      const open = this.clients.get(action.client as string);
      if (action.reconnect === true && open) {
        // A reconnect closes the client's open socket first, as the port's does.
        this.clients.delete(action.client as string);
        open.close(1000, "reconnect");
        await settle();
      }
      await this.connect(stub, alias, action.client as string);
      return;
    }
    let status: { done: boolean };
    // What a waited call or a request answered, when it answered (`harness:reply`).
    const reply = (ok: boolean, value: unknown, error?: unknown) => {
      const payload: Record<string, Json> = {
        step: action.step ?? null,
        ok,
        value: ok ? ((value ?? null) as Json) : null
      };
      if (!ok) payload.error = errorValue(error);
      record(this.doName(alias), "harness:reply", payload);
    };
    if (action.do === "call") {
      const method = action.method as string;
      const call = stub[method](...((action.args ?? []) as unknown[]));
      let answer = reply;
      if (action.wait === false) {
        const outcome: (typeof this.unawaited)[number] = { step: action.step ?? 0, alias, ok: null };
        this.unawaited.push(outcome);
        answer = (ok, _value, error) => {
          outcome.ok = ok;
          if (!ok) outcome.error = errorValue(error);
        };
      }
      status = this.track(call, `call ${alias}.${method}`, answer, this.starting.get(alias));
      if (action.snapshot) this.snapshot(action.snapshot, before ?? undefined);
    } else {
      const init: RequestInit = { method: action.http_method ?? "GET" };
      if (action.body !== undefined && action.body !== null) {
        init.body = JSON.stringify(action.body);
        init.headers = { "content-type": "application/json", ...(action.headers ?? {}) };
      } else if (action.headers) {
        init.headers = action.headers;
      }
      // A drill-in (`/sub/Child/name/...`) reaches the parent as the SDK routes it: under the
      // agent's own address, where its fetch looks for the sub-agent marker.
      // The SDK's router spells a child class in kebab case (`/sub/story-child/...`).
      const path = action.path ?? "/";
      const routed = path.startsWith("/sub/")
        ? path.replace(/^\/sub\/([^/]+)/, (_m, cls: string) => `/sub/${kebab(cls)}`)
        : path;
      const request = new Request(`https://agent.test${routed}`, init);
      const answered = stub.fetch(request).then(async (response: Response) => {
        const text = await response.text();
        let body: Json = text;
        try {
          body = JSON.parse(text) as Json;
        } catch {
          // a text body stays text
        }
        return { status: response.status, body };
      });
      status = this.track(
        answered,
        `request ${alias} ${action.path}`,
        reply,
        this.starting.get(alias)
      );
    }
    await settle();
    if (action.wait !== false) {
      await this.advanceTo(this.plan.end_ms, () => status.done);
    }
  }

  /** The alarm each agent has armed (`harness:alarm`), after the step `label`; `alarms`
   * gives the slots to read instead of the current ones. */
  private snapshot(label: string | null, alarms?: Map<string, number | null>): void {
    for (const name of Object.keys(this.plan.agents)) {
      const key = this.keys.get(name);
      const slots = alarms ?? shared().alarms;
      const at = key === undefined ? null : (slots.get(key) ?? null);
      record(this.doName(name), "harness:alarm", { at, step: label });
    }
  }

  /** The alarms as they were before the first of the calls sent without waiting since the
   * port last ran: it sends each such call and returns at once, so nothing any of them does has
   * run when their steps' snapshots are taken, until a step with a time of its own (`settled`)
   * runs the port to it. */
  private sentAt: { t: number; alarms: Map<string, number | null> } | null = null;

  private alarmsBeforeSending(t: number): Map<string, number | null> {
    if (this.sentAt === null || this.sentAt.t !== t) {
      this.sentAt = { t, alarms: new Map(shared().alarms) };
    }
    return this.sentAt.alarms;
  }

  /** `harness:outcome {step, ok, error}` of every call not waited for, at the end. */
  outcomes(): void {
    for (const outcome of this.unawaited) {
      const payload: Record<string, Json> = { step: outcome.step, ok: outcome.ok };
      if (outcome.error !== undefined) payload.error = outcome.error;
      record(this.doName(outcome.alias), "harness:outcome", payload);
    }
  }

  /** DO ids of the live sub-agents under `alias` (`child` given: that one only). */
  private facetKeys(alias: string, child?: string): string[] {
    const root = this.doName(alias);
    const out: string[] = [];
    for (const [key, path] of shared().facets) {
      const under = child === undefined ? path.startsWith(`${root}/`) : path === `${root}/${child}`;
      if (under && shared().live.get(key)) out.push(key);
    }
    return out;
  }

  /** Evict one sub-agent of a live root: its sleeps never fire, and its parent's facet
   * handle aborts it, as the platform ends a facet on its own. A sub-agent already gone
   * (its root died at this instant) needs nothing. */
  private async evictChild(
    alias: string,
    className: string,
    child: string,
    reason = "explicit"
  ): Promise<void> {
    const keys = this.facetKeys(alias, child);
    const stub = this.stubs.get(alias);
    const rootKey = this.keys.get(alias);
    if (!keys.length || !stub || !rootKey || !shared().live.get(rootKey)) return;
    for (const key of keys) {
      dropTimers(key);
      shared().live.set(key, false);
    }
    await runInDurableObject(stub, (instance: unknown) => {
      (instance as { abortSubAgent(cls: { name: string }, name: string, reason: unknown): void })
        .abortSubAgent({ name: className }, child, new Error(`${RESET_PREFIX}${reason}`));
    });
  }

  /** `root/child` for the name a sub-agent's records carry, from the facets this play saw. */
  facetAliases(): Map<string, string> {
    const out = new Map<string, string>();
    for (const path of shared().facets.values()) {
      const names = path.split("/");
      const root = names[0].endsWith(this.suffix) ? names[0].slice(0, -this.suffix.length) : names[0];
      out.set(names[names.length - 1], [root, ...names.slice(1)].join("/"));
    }
    return out;
  }

  /** Open a WebSocket to the agent as client `client`; every frame it receives is a record. */
  private async connect(stub: Stub, alias: string, client: string): Promise<void> {
    const request = new Request(`https://agent.test/agents/x/${this.doName(alias)}`, {
      headers: { Upgrade: "websocket" }
    });
    let socket: WebSocket | null = null;
    try {
      socket = (await stub.fetch(request)).webSocket;
    } catch (error) {
      this.errors.push(`connect ${client}: ${String(error)}`);
    }
    if (!socket) {
      this.errors.push(`connect ${client}: the agent accepted no WebSocket`);
      return;
    }
    socket.accept();
    const doName = this.doName(alias);
    socket.addEventListener("message", (event: MessageEvent) => {
      // The frames name the agent by its Durable Object name: the play's suffix goes.
      const text = String(event.data).split(this.suffix).join("");
      let frame: Json;
      try {
        frame = JSON.parse(text) as Json;
      } catch {
        frame = text;
      }
      record(doName, "harness:frame", { client, frame });
    });
    socket.addEventListener("close", (event: CloseEvent) => {
      record(doName, "harness:close", { client, code: event.code });
    });
    this.clients.set(client, socket);
    await settle();
  }

  async tables(): Promise<PlayResult["tables"]> {
    const result: PlayResult["tables"] = {};
    for (const [alias, stub] of this.stubs) {
      // Its own tables and every sub-agent's below it (read through their parents).
      const all = await runInDurableObject(stub, (instance: unknown) =>
        (instance as HarnessAgent).harnessTables()
      );
      for (const [path, tables] of Object.entries(all)) {
        result[path ? `${alias}/${path}` : alias] = tables;
      }
    }
    return result;
  }
}

async function play(plan: Plan, repetition: number): Promise<PlayResult> {
  resetRun();
  inFlight.clear();
  const player = new Player(plan, `--${plan.name}--r${repetition}`);
  for (const [alias, agent] of Object.entries(plan.agents)) {
    shared().options.set(agent.class, agent.options);
    shared().agentOptions.set(player.doName(alias), agent.options);
  }
  // The scenario's scripted model services, for the chat agents' model (scripted-model.ts).
  shared().options.set("ScriptedModel", { services: (plan.models ?? {}) as Json });
  loadDraws(plan.jitter);
  const actions = [...plan.actions];
  for (const action of actions) {
    await player.advanceTo(action.t);
    await player.perform(action);
    await settle();
  }
  await player.advanceTo(plan.end_ms);
  player.outcomes();
  player.errors.push(...jitterNotes());
  const records = [...shared().records];
  let tables: PlayResult["tables"] = {};
  try {
    tables = await player.tables();
  } catch (error) {
    player.errors.push(`reading tables: ${String(error)}`);
  }
  // Nothing of this play may reach the next one.
  for (const alias of Object.keys(plan.agents)) {
    const key = (env as unknown as Record<string, DurableObjectNamespace>)[
      plan.agents[alias].class
    ]
      ?.idFromName(player.doName(alias))
      .toString();
    if (key) dropTimers(key);
  }
  const suffix = `--${plan.name}--r${repetition}`;
  const facets = player.facetAliases();
  for (const item of records) {
    if (item.agent?.endsWith(suffix)) item.agent = item.agent.slice(0, -suffix.length);
    else if (facets.has(item.agent)) item.agent = facets.get(item.agent) as string;
  }
  return { records, tables, errors: player.errors };
}

const plans = JSON.parse(
  String((env as unknown as Record<string, string>).PLANS ?? '{"plans": []}')
) as { plans: Plan[] };

installVirtualDate();
installVirtualTimers();
installSeededJitter();
subscribeChannels();

describe("plans", () => {
  if (plans.plans.length === 0) {
    it("has no plan to play", () => undefined);
  }
  for (const plan of plans.plans) {
    it(plan.name, async ({ task }) => {
      const plays: PlayResult[] = [];
      for (let repetition = 0; repetition < plan.repeat; repetition++) {
        plays.push(await play(plan, repetition));
      }
      (task.meta as Record<string, unknown>).agentsimPlays = JSON.parse(JSON.stringify(plays));
    });
  }
});
