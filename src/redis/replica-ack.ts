// Whether a paid write is held by a replica as well as by the primary that answered it. Redis
// replicates asynchronously: a primary acknowledges a write before any replica has it, and a
// failover promotes a replica without it. The Sentinel test saw exactly that: a plate's settle
// (its outcome, the batch's done count) went to the old primary just before SENTINEL FAILOVER
// and was lost, while BullMQ's completion of its job reached the new one, so the batch never
// finished and a paid result was gone (fact 1).
//
// WAIT answers for the writes of the connection it is sent on, so it must follow the write on
// the same connection and in the same life of it: after a reconnect (ioredis re-sends what was
// unanswered, and Sentinel's failover detector reconnects on +switch-master) WAIT would speak
// for a fresh connection that wrote nothing. Each 'ready' starts a new life; a write confirmed
// in another life than it was sent in is made again by the caller (its writes are idempotent).
import { RedisUnreplicatedError } from '../errors.js';
import type { RedisClient } from './connection.js';

/** WAIT's bound: it blocks the command connection meanwhile, so a dead replica costs this per write. */
export const REPLICA_ACK_TIMEOUT_MS = 1_000;

export class ReplicaAck {
  readonly #redis: RedisClient;
  readonly #replicas: number;
  readonly #timeoutMs: number;
  #life = 0;

  /** `replicas` 0: every write counts as held (standalone, Cluster), and nothing is sent. */
  constructor(redis: RedisClient, replicas: number, timeoutMs = REPLICA_ACK_TIMEOUT_MS) {
    this.#redis = redis;
    this.#replicas = replicas;
    this.#timeoutMs = timeoutMs;
    if (replicas > 0) redis.on('ready', () => this.#life++);
  }

  get enabled(): boolean {
    return this.#replicas > 0;
  }

  /**
   * Waits (at most the timeout) until the replicas hold every write this connection made, and
   * says how many do: best effort, for a write whose loss is allowed for (the `creating` mark).
   */
  async wait(): Promise<number> {
    return await this.#redis.wait(this.#replicas, this.#timeoutMs);
  }

  /**
   * The life a write sent now goes out in: taken before it is sent. A connection not ready (still
   * connecting, or reconnecting after a failover) queues the write until its next 'ready'
   * (ioredis's offline queue): the next life. Counted as this one, every paid write queued during
   * a reconnect was made twice, though the WAIT after it spoke for it.
   */
  mark(): number {
    return this.#redis.status === 'ready' ? this.#life : this.#life + 1;
  }

  /**
   * Resolves once `replicas` replicas hold every write this connection made, in the life `mark`
   * names; else throws RedisUnreplicatedError (a Redis-down error to the callers: write again).
   */
  async confirm(mark: number): Promise<void> {
    if (this.#replicas === 0) return;
    const acked = await this.wait();
    const reconnected = this.#life !== mark;
    if (acked < this.#replicas || reconnected)
      throw new RedisUnreplicatedError(acked, this.#replicas, this.#timeoutMs, reconnected);
  }
}
