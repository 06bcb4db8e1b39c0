// Types of `halfopen/redis-store` (hand-checked against redis-store.js).
import type { DispatcherStore } from './index.js'

/** The Redis client this store needs: ioredis's `multi`. */
export interface RedisLike {
  multi(commands?: unknown[][]): { exec(): Promise<Array<[Error | null, unknown]> | null> } & Record<string, unknown>
}

/** A Dispatcher store on Redis: messages in the hash `<key>:messages`, their keys in `<key>:keys`, the state saved by `close()` in `<key>:state`. */
export declare class RedisStore<M = unknown> implements DispatcherStore<M> {
  constructor(redis: RedisLike, options?: { key?: string; encode?: (message: M) => string; decode?: (text: string) => M })
  readonly key: string
  add(seq: number, message: M, key?: string): Promise<void>
  remove(seq: number): Promise<void>
  clear(): Promise<void>
  save(snapshot: object | null): Promise<void>
  load(): Promise<{ snapshot: object | null; messages: Array<[number, M] | [number, M, string]> }>
}
