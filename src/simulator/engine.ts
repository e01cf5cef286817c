// The simulated upstream's decisions for one API request, in contract order:
//   route → key (401) → rate limit and quota (429; otherwise the request is counted) →
//   faults (drop / 5xx, decided after counting: a failed request still costs quota upstream) →
//   permission (403) → product / body / plate (404 / 400) → create or get.
// No sockets here: the result is a Reply that server.ts carries out.

import { clock } from '../clock.js';
import { checkPlate } from '../plates.js';
import { parseRateLimit } from '../setting-values.js';
import { type AnswerShapeName, type QueryView, shapeAnswer } from './answers.js';
import { type VehicleChange, VehicleChanges } from './changes.js';
import { type KeyRecord, KeyStore } from './keys.js';
import { chance, isForgotten, planCreate, type QueryStatus, statusAt } from './lifecycle.js';
import { createLimiter, type Limiter, type LimitState, retryAfterSeconds } from './limiter.js';
import { PERMISSION_LABELS, type Permission, PLANS, type SimulatorOptions, validatePatch } from './options.js';
import { QuotaCounter, type QuotaState } from './quota.js';
import { errorReply, htmlReply, jsonReply, type Reply, type Respond } from './reply.js';
import { StallWatch } from './stall-watch.js';
import { type SimulatorStats, StatsCollector } from './stats.js';
import { packPlate, QueryStore } from './store.js';
import { fakeVehicle } from './vehicle.js';

export interface ApiRequest {
  method: string;
  /** URL path without the query string. */
  path: string;
  /** The `x-api-key` header; `Authorization` is deliberately ignored. */
  apiKey: string | undefined;
  body: string;
  bodyTooLarge: boolean;
  /** When the request's headers arrived (the engine's clock); the limits count it then. Default: now. */
  receivedAt?: number;
}

export interface EngineDeps {
  now: () => number;
  random: () => number;
}

interface KeyLimits {
  signature: string;
  limiter: Limiter | null;
  quota: QuotaCounter;
}

const ROUTE = /^\/queries\/integration\/([^/]+)\/?$/;

export class SimulatorEngine {
  options: SimulatorOptions;
  readonly keys: KeyStore;
  readonly store: QueryStore;
  /** Answers changed since (admin `POST /__admin/changes`): for watch lists to find. */
  readonly changes = new VehicleChanges();
  stats = new StatsCollector();
  /** This process's own stalls, watched while the server runs (startSimulator). */
  readonly stalls: StallWatch;
  readonly #deps: EngineDeps;
  readonly #originMs: number;
  #failPlates: Set<string>;
  #limits = new Map<string, KeyLimits>();
  /** Queries whose first poll was decided (pollNotFoundOnceRate): a 404 comes at most once each. */
  readonly #notFoundOnce = new Set<number>();

  constructor(options: SimulatorOptions, deps: EngineDeps) {
    this.options = options;
    this.#deps = deps;
    this.#originMs = deps.now();
    this.keys = new KeyStore(options.keys);
    this.store = new QueryStore(Math.floor(deps.random() * 0xffffffff));
    this.#failPlates = new Set(options.failPlates);
    // The process's own time, not an injected `now`: a test's clock moved by hand is no stall.
    this.stalls = new StallWatch(clock.now);
  }

  now(): number {
    return this.#deps.now();
  }

  /** Applies a validated patch at run time. `keys` replaces the key set; host and port only matter at start. */
  update(patch: unknown): SimulatorOptions {
    const valid = validatePatch(patch, 'simulator config');
    this.options = { ...this.options, ...valid };
    if (valid.keys) this.keys.replaceAll(valid.keys);
    if (valid.failPlates) this.#failPlates = new Set(valid.failPlates);
    return this.options;
  }

  /** Clears statistics and limiter/quota state; queries and keys stay. */
  reset(): void {
    this.stats = new StatsCollector();
    this.#limits.clear();
  }

  /** Gives a share of the plates queried so far (or the plates named) a new restriction or owner. */
  changeVehicles(options: { share?: number; plates?: readonly string[] }): VehicleChange[] {
    const seen: string[] = [];
    for (let i = 0; i < this.store.size; i++) {
      const query = this.store.get(i);
      if (query !== undefined) seen.push(query.plate);
    }
    return this.changes.change(fakeVehicle, seen, options, this.#deps.random);
  }

  snapshot(withPlates = false, withTimes = false): SimulatorStats {
    return this.stats.snapshot(this.store.size, withPlates, withTimes, () => this.stalls.list());
  }

  handle(request: ApiRequest): Reply {
    const reply = this.#decide(request);
    if (reply.kind === 'respond') this.stats.response(reply.status);
    const [min, max] = this.options.latencyMs;
    reply.delayMs += max > 0 ? Math.round(min + this.#deps.random() * (max - min)) : 0;
    return reply;
  }

  #decide(request: ApiRequest): Reply {
    const now = request.receivedAt ?? this.#deps.now();
    this.stats.request(now);
    const route = ROUTE.exec(request.path);
    if (!route || (request.method !== 'POST' && request.method !== 'GET')) {
      return errorReply(404, 'NOT_FOUND', `Cannot ${request.method} ${request.path}`);
    }
    let segment: string;
    try {
      segment = decodeURIComponent(route[1]!);
    } catch {
      return errorReply(404, 'NOT_FOUND', `Cannot ${request.method} ${request.path}`);
    }

    const check = this.keys.check(request.apiKey, now);
    if (!check.ok) return errorReply(401, check.code, check.message);
    const record = check.record;

    const limited = this.#admit(record, now, request.method === 'POST' ? 'create' : 'get');
    if (limited.reply) return limited.reply;
    const headers = limited.headers;
    if (request.method === 'POST') this.stats.countedCreates += 1;
    else this.stats.countedGets += 1;

    if (chance(this.options.dropRate, this.#deps.random)) {
      this.stats.faults.drops += 1;
      return { kind: 'drop', delayMs: 0 };
    }
    if (chance(this.options.errorRate, this.#deps.random)) {
      this.stats.faults.errors += 1;
      return this.#serverError(headers);
    }

    const needed: Permission = request.method === 'POST' ? 'run_queries' : 'view_queries';
    if (!record.permissions.has(needed)) {
      const label = PERMISSION_LABELS[needed];
      return errorReply(
        403,
        'INSUFFICIENT_PERMISSIONS',
        `This API key lacks the permission "${label}" (${needed}).`,
        headers,
        {
          permission: needed,
        },
      );
    }
    return request.method === 'POST' ? this.#create(segment, request, headers, now) : this.#get(segment, headers, now);
  }

  /** Rate limit and quota: turn the request away (not counted) or count it and return the headers. */
  #admit(record: KeyRecord, now: number, kind: 'create' | 'get'): { reply?: Reply; headers: Record<string, string> } {
    const { limiter, quota, quotaLimit } = this.#limitsFor(record);
    const rate = limiter?.peek(now);
    const quotaWindow = { windowMs: this.options.quotaWindowMs, originMs: this.#originMs };
    const quotaState = quotaLimit === null ? undefined : quota.peek(now, quotaLimit, quotaWindow);

    if (quotaState && quotaState.retryAfterMs > 0) {
      this.stats.quotaExceeded += 1;
      const headers = rateHeaders(this.options.rateLimitHeaders, limiter, rate, quotaLimit, quotaState);
      this.stats.keyRateLimited(record.label);
      return {
        reply: tooMany('Daily quota exceeded', quotaState.retryAfterMs, headers, this.#retryDate(now)),
        headers,
      };
    }
    if (rate && rate.retryAfterMs > 0) {
      const headers = rateHeaders(this.options.rateLimitHeaders, limiter, rate, quotaLimit, quotaState);
      this.stats.keyRateLimited(record.label, now);
      return { reply: tooMany('Rate limit exceeded', rate.retryAfterMs, headers, this.#retryDate(now)), headers };
    }

    const rateAfter = limiter?.take(now);
    const quotaAfter = quotaLimit === null ? undefined : quota.take(now, quotaLimit, quotaWindow);
    const duration = limiter?.durationMs ?? parseRateLimit(this.options.rateLimit)?.durationMs ?? 60_000;
    this.stats.countedRequest(record.label, now, duration, kind);
    return { headers: rateHeaders(this.options.rateLimitHeaders, limiter, rateAfter, quotaLimit, quotaAfter) };
  }

  /** `now` when 429s carry Retry-After as an HTTP date. */
  #retryDate(now: number): number | undefined {
    return this.options.retryAfterFormat === 'date' ? now : undefined;
  }

  #limitsFor(record: KeyRecord): { limiter: Limiter | null; quota: QuotaCounter; quotaLimit: number | null } {
    const plan = record.plan ? PLANS[record.plan] : undefined;
    const rateText = record.rateLimit !== undefined ? record.rateLimit : plan ? plan.rateLimit : this.options.rateLimit;
    const quotaLimit =
      record.dailyQuota !== undefined ? record.dailyQuota : plan ? plan.dailyQuota : this.options.dailyQuota;
    const signature = `${this.options.window}|${rateText ?? 'unlimited'}`;
    // Keys of one contract spend one limit and one quota (the first key's, by its name).
    const owner = record.sharesWith ?? record.key;
    let entry = this.#limits.get(owner);
    if (!entry || entry.signature !== signature) {
      const spec = rateText === null ? undefined : parseRateLimit(rateText);
      // A new limit starts empty; the quota count survives limit changes.
      entry = {
        signature,
        limiter: spec ? createLimiter(this.options.window, spec) : null,
        quota: entry?.quota ?? new QuotaCounter(),
      };
      this.#limits.set(owner, entry);
    }
    return { limiter: entry.limiter, quota: entry.quota, quotaLimit };
  }

  #serverError(headers: Record<string, string>): Reply {
    const pick = Math.floor(this.#deps.random() * 3);
    if (pick === 0) return errorReply(500, 'INTERNAL_SERVER_ERROR', 'Internal server error.', headers);
    if (pick === 1 || this.#deps.random() < 0.5) {
      const status = pick === 1 ? 502 : 503;
      const text = status === 502 ? 'Bad Gateway' : 'Service Temporarily Unavailable';
      return htmlReply(
        status,
        `<html>\r\n<head><title>${status} ${text}</title></head>\r\n<body>\r\n<center><h1>${status} ` +
          `${text}</h1></center>\r\n</body>\r\n</html>\r\n`,
        headers,
      );
    }
    return errorReply(503, 'SERVICE_UNAVAILABLE', 'Service temporarily unavailable.', headers);
  }

  #create(slug: string, request: ApiRequest, headers: Record<string, string>, now: number): Reply {
    if (!this.options.products.includes(slug)) {
      return errorReply(404, 'PRODUCT_NOT_FOUND', `Unknown product "${slug}".`, headers);
    }
    if (request.bodyTooLarge) {
      return errorReply(413, 'PAYLOAD_TOO_LARGE', `Request body exceeds ${this.options.maxBodyBytes} bytes.`, headers);
    }
    const plateInput = readPlate(request.body);
    if (!plateInput.ok) return errorReply(400, 'INVALID_BODY', plateInput.message, headers);
    if (typeof plateInput.value !== 'string') {
      return errorReply(400, 'INVALID_PLATE', 'keys.licensePlate is required and must be a string.', headers);
    }
    const plate = checkPlate(plateInput.value);
    if (!plate.ok) {
      return errorReply(
        400,
        'INVALID_PLATE',
        `Invalid license plate ${JSON.stringify(plateInput.value)}: ${plate.message}.`,
        headers,
      );
    }

    const plan = planCreate(plate.plate, { ...this.options, failPlates: this.#failPlates }, this.#deps.random);
    const index = this.store.add(plate.plate, now, plan.delayMs, plan.failed);
    const view = this.#view(index, now);
    this.stats.created(packPlate(plate.plate), view.status);
    if (chance(this.options.dropAfterCreateRate, this.#deps.random)) {
      this.stats.faults.dropsAfterCreate += 1;
      return { kind: 'drop', delayMs: 0 };
    }
    return this.#afterCreate(this.#success(201, view.view, { ...headers, ...this.#billing(true) }), headers);
  }

  /** The faults that strike once the query was made (and paid): the client cannot tell from the answer. */
  #afterCreate(reply: Respond, headers: Record<string, string>): Reply {
    const o = this.options;
    const f = this.stats.faults;
    if (chance(o.gatewayErrorAfterCreateRate, this.#deps.random)) {
      f.gatewayErrorsAfterCreate += 1;
      return htmlReply(
        502,
        '<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad ' +
          'Gateway</h1></center>\r\n</body>\r\n</html>\r\n',
        headers,
      );
    }
    if (chance(o.cutBodyAfterCreateRate, this.#deps.random)) {
      f.cutBodiesAfterCreate += 1;
      return {
        kind: 'cut',
        status: reply.status,
        headers: reply.headers,
        body: reply.body,
        sendBytes: Math.floor(reply.body.length / 2),
        delayMs: 0,
      };
    }
    if (chance(o.truncatedBodyAfterCreateRate, this.#deps.random)) {
      f.truncatedBodiesAfterCreate += 1;
      return { ...reply, body: reply.body.slice(0, Math.floor(reply.body.length / 2)) };
    }
    if (chance(o.stallBodyAfterCreateRate, this.#deps.random)) {
      f.stalledBodiesAfterCreate += 1;
      return { kind: 'stall', status: reply.status, headers: reply.headers, body: reply.body, delayMs: 0 };
    }
    if (chance(o.slowCreateRate, this.#deps.random)) {
      f.slowCreates += 1;
      return { ...reply, delayMs: o.slowCreateMs };
    }
    return reply;
  }

  #get(queryId: string, headers: Record<string, string>, now: number): Reply {
    const index = this.store.indexOf(queryId);
    const query = index === undefined ? undefined : this.store.get(index);
    if (index === undefined || !query || isForgotten(query, this.options.queryTtlMs, now)) {
      return errorReply(404, 'QUERY_NOT_FOUND', `No query with id "${queryId}".`, headers);
    }
    // An upstream that does not know a just-created query yet: its first poll is a 404, once.
    if (
      this.options.pollNotFoundOnceRate > 0 &&
      !this.#notFoundOnce.has(index) &&
      chance(this.options.pollNotFoundOnceRate, this.#deps.random)
    ) {
      this.#notFoundOnce.add(index);
      this.stats.faults.pollsNotFound += 1;
      return errorReply(404, 'QUERY_NOT_FOUND', `No query with id "${queryId}".`, headers);
    }
    this.#notFoundOnce.add(index);
    this.stats.got(index);
    return this.#success(200, this.#view(index, now).view, { ...headers, ...this.#billing(false) });
  }

  #view(index: number, now: number): { status: QueryStatus; view: QueryView } {
    const query = this.store.get(index)!;
    const { status, completedAtMs } = statusAt(query, now);
    const fields: Record<string, unknown> = {
      licensePlate: query.plate,
      createdAt: new Date(query.createdAtMs).toISOString(),
    };
    if (completedAtMs !== undefined) fields['completedAt'] = new Date(completedAtMs).toISOString();
    if (status === 'COMPLETED') fields['result'] = this.changes.apply(fakeVehicle(query.plate));
    if (status === 'FAILED')
      fields['error'] = { code: 'VEHICLE_NOT_FOUND', message: `No vehicle found for plate ${query.plate}.` };
    return { status, view: { id: this.store.idOf(index), status, fields } };
  }

  /** The price headers of an upstream that states its price (options.queryCost); none by default. */
  #billing(create: boolean): Record<string, string> {
    const cost = this.options.queryCost;
    if (cost === null) return {};
    return create ? { 'x-query-cost': cost, 'x-billed': 'true' } : { 'x-billed': 'false' };
  }

  /** The shape in force: --answers, or --answers-after's once that many queries were created. */
  get #shape(): AnswerShapeName {
    const after = this.options.answersAfter;
    return after && this.stats.creates >= after.creates ? after.shape : this.options.answers;
  }

  #success(status: number, view: QueryView, headers: Record<string, string>): Respond {
    return jsonReply(status, shapeAnswer(this.#shape, status, view, this.options), headers);
  }
}

function readPlate(raw: string): { ok: true; value: unknown } | { ok: false; message: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return { ok: false, message: 'Request body must be JSON: {"keys":{"licensePlate":"ABC1D23"}}.' };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { ok: false, message: 'Request body must be a JSON object.' };
  }
  const keys = (parsed as Record<string, unknown>)['keys'];
  if (typeof keys !== 'object' || keys === null || Array.isArray(keys)) {
    return { ok: false, message: 'Request body must hold an object "keys".' };
  }
  return { ok: true, value: (keys as Record<string, unknown>)['licensePlate'] };
}

function tooMany(what: string, retryAfterMs: number, headers: Record<string, string>, asDate?: number): Reply {
  const seconds = retryAfterSeconds(retryAfterMs);
  // RFC 9110 allows an HTTP date; some gateways send one (whole seconds, so it may lie a second short).
  const retryAfter = asDate !== undefined ? new Date(asDate + seconds * 1_000).toUTCString() : String(seconds);
  return errorReply(
    429,
    'RATE_LIMIT_EXCEEDED',
    `${what}. Try again in ${seconds} seconds.`,
    { ...headers, 'retry-after': retryAfter },
    {
      retryAfter: seconds,
      // Not in the provider's contract: the exact wait, so scaled-down tests need not round to seconds.
      retryAfterMs: Math.ceil(retryAfterMs),
    },
  );
}

/** X-RateLimit-* for the rate window; with the quota used up, Remaining is 0 and Reset is the quota reset. */
function rateHeaders(
  enabled: boolean,
  limiter: Limiter | null,
  rate: LimitState | undefined,
  quotaLimit: number | null,
  quota: QuotaState | undefined,
): Record<string, string> {
  if (!enabled) return {};
  const quotaOut = quota !== undefined && quota.remaining === 0;
  if (limiter && rate) {
    return {
      'x-ratelimit-limit': String(limiter.max),
      'x-ratelimit-remaining': String(quotaOut ? 0 : rate.remaining),
      'x-ratelimit-reset': String(Math.ceil((quotaOut ? quota.resetAtMs : rate.resetAtMs) / 1000)),
    };
  }
  if (quotaLimit !== null && quota) {
    return {
      'x-ratelimit-limit': String(quotaLimit),
      'x-ratelimit-remaining': String(quota.remaining),
      'x-ratelimit-reset': String(Math.ceil(quota.resetAtMs / 1000)),
    };
  }
  return {};
}
