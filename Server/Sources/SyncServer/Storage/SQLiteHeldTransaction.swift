import Foundation
import GRDB
import SyncCore
import SyncSQLite

/// A write transaction of ``SQLiteTableStore`` held open across awaits, for an atomic set of writes
/// (``TableStore/atomically(_:)``): GRDB's writer runs only synchronous work, so the writer connection is taken on a
/// thread of this transaction's own, which runs the store's work as it is handed over — each piece in a savepoint, as
/// its own transaction would be — until the set commits or rolls back. The rest of the server's writes wait for the
/// writer meanwhile, as they wait for any write; ``limit`` bounds how long.
final class SQLiteHeldTransaction: @unchecked Sendable {  // @unchecked: all state is guarded by `condition`.
    /// A piece of work: run on the writer, or failed once the transaction has ended.
    private struct Job {
        let run: (Database) -> Void
        let fail: (any Error) -> Void
    }

    private enum End { case commit, rollback }

    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var end: (End, CheckedContinuation<Void, any Error>)?
    /// Set once the thread takes no more work: why (the transaction ended, or failed).
    private var closed: (any Error)?
    private let pool: DatabasePool
    /// The schemas the set's writes published, held back until it commits (``SQLiteTableStore/publish(_:)``).
    let publications = Locked<[TableSchema]>([])
    /// The longest the transaction holds the writer; after it, it rolls back and its work fails as unavailable.
    private let limit: Duration

    private init(pool: DatabasePool, limit: Duration) {
        self.pool = pool
        self.limit = limit
    }

    /// Takes the writer on a new thread and begins the transaction.
    ///
    /// - Throws: The database's error when the transaction cannot begin.
    static func begin(_ pool: DatabasePool, limit: Duration) async throws -> SQLiteHeldTransaction {
        let held = SQLiteHeldTransaction(pool: pool, limit: limit)
        try await withCheckedThrowingContinuation { (started: CheckedContinuation<Void, any Error>) in
            let thread = Thread { held.hold(started: started) }
            thread.name = "SQLiteHeldTransaction"
            thread.start()
        }
        return held
    }

    /// Runs `body` on the writer, inside the transaction, in a savepoint: a throw undoes `body`'s own writes, as
    /// the rollback of its own transaction would.
    ///
    /// - Throws: What `body` throws, or ``TableStoreError/unavailable(_:)`` once the transaction has ended.
    func run<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let job = Job(
                run: { db in
                    continuation.resume(
                        with: Result {
                            try db.execute(sql: "SAVEPOINT \"set_member\"")
                            do {
                                let value = try body(db)
                                try db.execute(sql: "RELEASE \"set_member\"")
                                return value
                            } catch {
                                try? db.execute(sql: "ROLLBACK TO \"set_member\"")
                                try? db.execute(sql: "RELEASE \"set_member\"")
                                throw error
                            }
                        })
                },
                fail: { continuation.resume(throwing: $0) })
            condition.lock()
            defer { condition.unlock() }
            if let closed {
                job.fail(closed)
                return
            }
            jobs.append(job)
            condition.signal()
        }
    }

    /// Commits the transaction.
    ///
    /// - Throws: ``TableStoreError/unavailable(_:)`` when it ended before (after ``limit``), or the database's error
    ///   when it could not commit (it is then rolled back).
    func commit() async throws { try await finish(.commit) }

    /// Rolls the transaction back; one that ended otherwise is already gone.
    func rollback() async { try? await finish(.rollback) }

    private func finish(_ how: End) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            condition.lock()
            defer { condition.unlock() }
            if let closed {
                continuation.resume(throwing: closed)
                return
            }
            end = (how, continuation)
            condition.signal()
        }
    }

    /// The thread's work: the writer is held from `BEGIN IMMEDIATE` to the end, the commit, the rollback or
    /// ``limit``.
    private func hold(started: CheckedContinuation<Void, any Error>) {
        var began = false
        let deadline = Date().addingTimeInterval(Double(limit.components.seconds))
        var ending: (End, CheckedContinuation<Void, any Error>)?
        do {
            try pool.writeWithoutTransaction { db in
                try db.beginTransaction(.immediate)
                began = true
                started.resume()
                while true {
                    condition.lock()
                    while jobs.isEmpty, end == nil, condition.wait(until: deadline) {}
                    let job = jobs.isEmpty ? nil : jobs.removeFirst()
                    if job == nil {
                        ending = end
                        closed =
                            ending == nil
                            ? TableStoreError.unavailable("the set of writes took longer than \(limit) and was undone")
                            : TableStoreError.unavailable("the set of writes has ended")
                    }
                    condition.unlock()
                    if let job {
                        job.run(db)
                        continue
                    }
                    if ending?.0 == .commit {
                        do {
                            try db.commit()
                        } catch {
                            try? db.rollback()
                            throw error
                        }
                    } else {
                        try db.rollback()
                    }
                    return
                }
            }
            close(ending, nil)
        } catch {
            guard began else { return started.resume(throwing: error) }
            close(ending, error)
        }
    }

    /// Fails the work still waiting, and answers the commit or rollback that ended the transaction (or the error).
    private func close(_ ending: (End, CheckedContinuation<Void, any Error>)?, _ error: (any Error)?) {
        condition.lock()
        let reason = error ?? closed ?? TableStoreError.unavailable("the set of writes has ended")
        closed = reason
        let waiting = jobs
        jobs = []
        end = nil  // `ending`, or none: no end is asked for once `closed` is set
        condition.unlock()
        for job in waiting { job.fail(reason) }
        if let ending {
            if let error { ending.1.resume(throwing: error) } else { ending.1.resume() }
        }
    }
}
