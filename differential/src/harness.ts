/**
 * The harness the agents and the step runner share inside workerd: virtual time, the timer
 * queue agent sleeps wait on, the alarm each agent has armed, and the records both sides
 * compare.
 *
 * Everything lives on one object hung on `globalThis`, because the test module and the
 * Durable Objects run in the same isolate but may load this module through two module graphs:
 * one shared object keeps one clock. Time is virtual: `Date` is replaced by a subclass whose
 * "now" is `BASE_MS + now`, and agent code sleeps through `sleep`, which only the step runner
 * resolves, in due order. `BASE_MS` lies far in the future so that an alarm the SDK arms is
 * never due on the real clock: workerd would fire it by itself, out of the runner's order.
 */
import { subscribe } from "node:diagnostics_channel";

/** 2100-01-07T00:00:00Z, a Thursday at midnight like the port's epoch (1970-01-01): cron
 * fields (minute, hour, weekday) land on the same marks on both sides. */
export const BASE_MS = Date.UTC(2100, 0, 7);

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface TraceRecord {
  /** Virtual ms since the run began. */
  t: number;
  /** The Durable Object name of the agent that emitted it. */
  agent: string;
  type: string;
  payload: Json;
}

interface Timer {
  due: number;
  /** Creation order: timers due at one instant fire in it. */
  order: number;
  owner: string;
  fired: boolean;
  dead: boolean;
}

interface Shared {
  now: number;
  /** Bumped by every agent sleep (not by an SDK timeout): work that slept is parked. */
  seq: number;
  order: number;
  timers: Timer[];
  records: TraceRecord[];
  /** DO id (hex) -> the armed alarm in virtual ms, or null. */
  alarms: Map<string, number | null>;
  /** DO id (hex) -> how many times its agent wrote the slot (set or delete): a due held behind
   * a running handler is replaced by a write after it. */
  alarmWrites: Map<string, number>;
  /** DO id (hex) -> how many instances were constructed (the incarnation number). */
  incarnations: Map<string, number>;
  /** DO id (hex) -> whether an instance is alive (constructed and not evicted since). */
  live: Map<string, boolean>;
  /** DO id (hex) of a sub-agent -> its root-first path of names (`root/child`). */
  facets: Map<string, string>;
  /** Class name -> the scenario's options for that class (step_ms, keep_alive_interval_ms...). */
  options: Map<string, Record<string, Json>>;
  /** A root agent's Durable Object name -> its own options. The port lets two agents of one
   * workload carry different options (each is its own class there); the SDK keeps static options
   * per class, so the harness keeps them per agent, as two classes would. */
  agentOptions: Map<string, Record<string, Json>>;
  /** Bumped by everything that happens, so the runner can tell when work went quiet. */
  activity: number;
  subscribed: boolean;
}

const SHARED_KEY = "__agentsimDifferential";

export function shared(): Shared {
  const holder = globalThis as unknown as Record<string, Shared>;
  if (!holder[SHARED_KEY]) {
    holder[SHARED_KEY] = {
      now: 0,
      seq: 0,
      order: 0,
      timers: [],
      records: [],
      alarms: new Map(),
      alarmWrites: new Map(),
      incarnations: new Map(),
      live: new Map(),
      facets: new Map(),
      options: new Map(),
      agentOptions: new Map(),
      activity: 0,
      subscribed: false
    };
  }
  return holder[SHARED_KEY];
}

/** Virtual ms since the run began. */
export function now(): number {
  return shared().now;
}

/** Replace `Date` so that `Date.now()` and `new Date()` read the virtual clock. */
export function installVirtualDate(): void {
  const holder = globalThis as unknown as { Date: DateConstructor; __realDate?: DateConstructor };
  if (holder.__realDate) return;
  const RealDate = holder.Date;
  holder.__realDate = RealDate;
  class VirtualDate extends RealDate {
    constructor(...args: unknown[]) {
      if (args.length === 0) super(BASE_MS + shared().now);
      else super(...(args as [number]));
    }
    static override now(): number {
      return BASE_MS + shared().now;
    }
  }
  holder.Date = VirtualDate as unknown as DateConstructor;
}

/** Subscribe once to every observability channel of the SDK. */
export function subscribeChannels(): void {
  const state = shared();
  if (state.subscribed) return;
  state.subscribed = true;
  const names = [
    "state",
    "rpc",
    "message",
    "chat",
    "transcript",
    "fiber",
    "agent_tool",
    "schedule",
    "lifecycle",
    "workflow",
    "mcp",
    "email",
    "channel"
  ];
  for (const name of names) {
    subscribe(`agents:${name}`, (message: unknown) => {
      const event = message as { type: string; name: string; payload?: Json };
      record(event.name, event.type, event.payload ?? {});
    });
  }
}

export function record(agent: string, type: string, payload: Json): void {
  const state = shared();
  state.activity += 1;
  state.records.push({ t: state.now, agent, type, payload: clone(payload) });
}

function clone(value: Json): Json {
  try {
    return JSON.parse(JSON.stringify(value ?? null)) as Json;
  } catch {
    return String(value);
  }
}

/** Resolves once the step runner fired this timer at `now + ms` of virtual time.
 *
 * The agent polls its own timer on a real 1 ms timeout rather than being resolved by the
 * runner: a promise resolved from the test's request context would continue in the wrong
 * I/O context, and workerd cancels such continuations once the creating request is over.
 * A timer dropped by an eviction is never fired, so the dead incarnation never goes on. */
export async function sleep(owner: string, ms: number): Promise<void> {
  const state = shared();
  state.seq += 1;
  const timer = addTimer(owner, ms);
  while (!timer.fired) {
    if (timer.dead) return new Promise<void>(() => undefined);
    await new Promise((resolve) => realTimers().setTimeout(resolve, 1));
  }
}

function addTimer(owner: string, ms: number): Timer {
  const state = shared();
  state.activity += 1;
  state.order += 1;
  const due = state.now + Math.max(0, ms);
  const timer: Timer = { due, order: state.order, owner, fired: false, dead: false };
  state.timers.push(timer);
  return timer;
}

interface RealTimers {
  setTimeout: typeof setTimeout;
  clearTimeout: typeof clearTimeout;
}

/** The isolate's own timers, kept before `installVirtualTimers` replaced them: the harness's
 * polling and the runner's quiet-period checks run on real time. */
export function realTimers(): RealTimers {
  const holder = globalThis as unknown as { __realTimers?: RealTimers };
  return holder.__realTimers ?? { setTimeout, clearTimeout };
}

/** Put the SDK's `setTimeout` timers on virtual time: a re-attach's no-progress budget and
 * maximum window, a recovery inspection's or hook's timeout wait for the runner to reach
 * their instant, as the port's do on its clock. A zero delay stays a real yield. The
 * callback runs in the context that set the timer: it polls its virtual timer there on a
 * real 1 ms timeout, as an agent's sleep does. */
export function installVirtualTimers(): void {
  const holder = globalThis as unknown as {
    __realTimers?: RealTimers;
    setTimeout: typeof setTimeout;
    clearTimeout: typeof clearTimeout;
  };
  if (holder.__realTimers) return;
  const real: RealTimers = {
    setTimeout: holder.setTimeout.bind(globalThis),
    clearTimeout: holder.clearTimeout.bind(globalThis)
  };
  holder.__realTimers = real;
  const virtual = new WeakSet<object>();
  holder.setTimeout = ((callback: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const delay = Number(ms ?? 0);
    if (!(delay > 0)) return real.setTimeout(callback, ms, ...args);
    const timer = addTimer("sdk", delay);
    virtual.add(timer);
    const poll = () => {
      if (timer.dead) return;
      if (timer.fired) callback(...args);
      else real.setTimeout(poll, 1);
    };
    real.setTimeout(poll, 1);
    return timer as unknown as ReturnType<typeof setTimeout>;
  }) as typeof setTimeout;
  holder.clearTimeout = ((handle?: unknown) => {
    if (handle && typeof handle === "object" && virtual.has(handle)) {
      const timer = handle as Timer;
      timer.dead = true;
      const state = shared();
      state.timers = state.timers.filter((t) => t !== timer);
      state.activity += 1;
      return;
    }
    real.clearTimeout(handle as never);
  }) as typeof clearTimeout;
}

/** The earliest pending timer, or null. */
export function nextTimer(): Timer | null {
  const timers = shared().timers;
  let best: Timer | null = null;
  for (const timer of timers) {
    if (best === null || timer.due < best.due || (timer.due === best.due && timer.order < best.order))
      best = timer;
  }
  return best;
}

export function fireTimer(timer: Timer): void {
  const state = shared();
  state.timers = state.timers.filter((t) => t !== timer);
  state.activity += 1;
  timer.fired = true;
}

/** The instance that owned these timers is gone: they never fire (eviction never unwinds). */
export function dropTimers(owner: string): void {
  const state = shared();
  for (const timer of state.timers) if (timer.owner === owner) timer.dead = true;
  state.timers = state.timers.filter((t) => t.owner !== owner);
}

/** A scenario option of the agent named `name` (a root's own), else of its class, else the
 * fallback. */
export function option<T extends Json>(
  className: string,
  key: string,
  fallback: T,
  name: string | null = null
): T {
  const own = name === null ? undefined : shared().agentOptions.get(name);
  if (own && key in own) return own[key] as T;
  const options = shared().options.get(className);
  return options && key in options ? (options[key] as T) : fallback;
}

/** Reset everything between two plays. */
export function resetRun(): void {
  const state = shared();
  state.now = 0;
  for (const timer of state.timers) timer.dead = true;
  state.timers = [];
  state.records = [];
  state.alarms = new Map();
  state.incarnations = new Map();
  state.live = new Map();
  state.facets = new Map();
  state.options = new Map();
  state.agentOptions = new Map();
  state.activity += 1;
}
