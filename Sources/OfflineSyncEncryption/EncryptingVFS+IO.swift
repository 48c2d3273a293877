import Foundation
import GRDBSQLite

/// The I/O of an encrypted file: reads decrypt and writes encrypt the units of its role (database pages, WAL frame
/// pages, journal pages); the rest goes to the platform's file as it is.
extension EncryptingVFS {
    static let pageSize = PageCipher.pageSize
    /// A WAL's header, and each frame's header before its page (SQLite's WAL format).
    static let walHeader = 32
    static let frameHeader = 24

    static let ioMethods = sqlite3_io_methods(
        iVersion: 2,  // no xFetch: memory-mapped reads would bypass the cipher
        xClose: { file in
            guard let state = EncryptingVFS.state(file) else { return SQLITE_OK }
            let code = state.innerMethods?.xClose?(state.inner) ?? SQLITE_OK
            if let file {
                let slot = UnsafeMutableRawPointer(file).advanced(by: FileLayout.state).assumingMemoryBound(
                    to: UnsafeMutableRawPointer?.self)
                slot.pointee.map { Unmanaged<FileState>.fromOpaque($0).release() }
                slot.pointee = nil
            }
            return code
        },
        xRead: { file, buffer, amount, offset in
            guard let state = EncryptingVFS.state(file), let buffer else { return IOError.read }
            return state.read(UnsafeMutableRawBufferPointer(start: buffer, count: Int(amount)), at: Int(offset))
        },
        xWrite: { file, buffer, amount, offset in
            guard let state = EncryptingVFS.state(file), let buffer else { return IOError.write }
            return state.write(UnsafeRawBufferPointer(start: buffer, count: Int(amount)), at: Int(offset))
        },
        xTruncate: { file, size in
            EncryptingVFS.forward(file, IOError.truncate) { $0.xTruncate?($1, size) }
        },
        xSync: { file, flags in
            EncryptingVFS.forward(file, IOError.fsync) { $0.xSync?($1, flags) }
        },
        xFileSize: { file, size in
            EncryptingVFS.forward(file, IOError.fstat) { $0.xFileSize?($1, size) }
        },
        xLock: { file, lock in
            EncryptingVFS.forward(file, IOError.lock) { $0.xLock?($1, lock) }
        },
        xUnlock: { file, lock in
            EncryptingVFS.forward(file, IOError.unlock) { $0.xUnlock?($1, lock) }
        },
        xCheckReservedLock: { file, result in
            EncryptingVFS.forward(file, IOError.checkReservedLock) { $0.xCheckReservedLock?($1, result) }
        },
        xFileControl: { file, operation, argument in
            guard let state = EncryptingVFS.state(file) else { return SQLITE_NOTFOUND }
            // Memory-mapped I/O would read pages undecrypted: refused.
            if operation == SQLITE_FCNTL_MMAP_SIZE {
                argument?.assumingMemoryBound(to: Int64.self).pointee = 0
                return SQLITE_OK
            }
            return state.innerMethods?.xFileControl?(state.inner, operation, argument) ?? SQLITE_NOTFOUND
        },
        xSectorSize: { file in
            EncryptingVFS.forward(file, 4096) { $0.xSectorSize?($1) }
        },
        xDeviceCharacteristics: { file in
            EncryptingVFS.forward(file, 0) { $0.xDeviceCharacteristics?($1) }
        },
        xShmMap: { file, region, size, extend, pointer in
            EncryptingVFS.forward(file, IOError.shmMap) { $0.xShmMap?($1, region, size, extend, pointer) }
        },
        xShmLock: { file, offset, count, flags in
            EncryptingVFS.forward(file, IOError.shmLock) { $0.xShmLock?($1, offset, count, flags) }
        },
        xShmBarrier: { file in
            guard let state = EncryptingVFS.state(file) else { return }
            state.innerMethods?.xShmBarrier?(state.inner)
        },
        xShmUnmap: { file, delete in
            EncryptingVFS.forward(file, SQLITE_OK) { $0.xShmUnmap?($1, delete) }
        },
        xFetch: nil,
        xUnfetch: nil)
}

extension EncryptingVFS {
    /// Calls the platform file's method `call` picks for `file`, or answers `fallback` when there is none.
    static func forward(
        _ file: UnsafeMutablePointer<sqlite3_file>?, _ fallback: Int32,
        _ call: (sqlite3_io_methods, UnsafeMutablePointer<sqlite3_file>) -> Int32?
    ) -> Int32 {
        guard let state = state(file), let methods = state.innerMethods else { return fallback }
        return call(methods, state.inner) ?? fallback
    }
}

/// One unit of a file: where it starts and its position for the associated data.
struct CipherUnit {
    var start: Int
    var position: UInt64
}

extension EncryptingVFS.FileState {
    /// The units of this file that overlap `range`.
    func units(overlapping range: Range<Int>) -> [CipherUnit] {
        let size = EncryptingVFS.pageSize
        switch role {
        case .database:
            guard !range.isEmpty else { return [] }
            let first = range.lowerBound / size
            let last = (range.upperBound - 1) / size
            return (first...last).map { CipherUnit(start: $0 * size, position: UInt64($0 + 1)) }
        case .wal:
            let frame = EncryptingVFS.frameHeader + size
            let firstPage = EncryptingVFS.walHeader + EncryptingVFS.frameHeader
            guard range.upperBound > firstPage else { return [] }
            let first = max(0, (range.lowerBound - firstPage) / frame)
            var units: [CipherUnit] = []
            var index = first
            while firstPage + index * frame < range.upperBound {
                let start = firstPage + index * frame
                if start + size > range.lowerBound { units.append(CipherUnit(start: start, position: UInt64(start))) }
                index += 1
            }
            return units
        case .journal:
            // Only a whole page at an offset that is not a sector boundary: a page a journal record saves (the
            // journal's headers sit at sector boundaries, in the clear).
            guard range.count == size, range.lowerBound % 512 != 0 else { return [] }
            return [CipherUnit(start: range.lowerBound, position: UInt64(range.lowerBound))]
        }
    }

    func rawRead(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Int32 {
        guard let read = innerMethods?.xRead else { return IOError.read }
        return read(inner, buffer.baseAddress, Int32(buffer.count), Int64(offset))
    }

    func rawWrite(_ buffer: UnsafeRawBufferPointer, at offset: Int) -> Int32 {
        guard let write = innerMethods?.xWrite else { return IOError.write }
        return write(inner, buffer.baseAddress, Int32(buffer.count), Int64(offset))
    }

    /// Reads one whole unit and decrypts it into `page`. IOError.shortRead: not (all) there, zeros.
    func readUnit(_ unit: CipherUnit, into page: UnsafeMutableRawBufferPointer) -> Int32 {
        let code = rawRead(page, at: unit.start)
        guard code == SQLITE_OK else { return code }
        do {
            try cipher.open(page, role: role, position: unit.position)
            return SQLITE_OK
        } catch {
            return IOError.data
        }
    }

    func read(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Int32 {
        let range = offset..<(offset + buffer.count)
        let units = units(overlapping: range)
        // The bytes in the clear (a WAL's and its frames' headers, a journal's records) as they are.
        var short = false
        if role != .database || units.isEmpty {
            let code = rawRead(buffer, at: offset)
            if code == IOError.shortRead { short = true } else if code != SQLITE_OK { return code }
        }
        let size = EncryptingVFS.pageSize
        let page = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { page.deallocate() }
        for unit in units {
            let code = readUnit(unit, into: page)
            let overlap = max(unit.start, range.lowerBound)..<min(unit.start + size, range.upperBound)
            let target = UnsafeMutableRawBufferPointer(
                rebasing: buffer[(overlap.lowerBound - offset)..<(overlap.upperBound - offset)])
            switch code {
            case SQLITE_OK:
                target.copyMemory(
                    from: UnsafeRawBufferPointer(
                        rebasing: page[(overlap.lowerBound - unit.start)..<(overlap.upperBound - unit.start)]))
            case IOError.shortRead:
                target.initializeMemory(as: UInt8.self, repeating: 0)
                short = true
            case IOError.data where role != .database && buffer.count != size:
                // A WAL's recovery reads whole frames, and a crash may have torn the last ones: zeros make SQLite's
                // checksum end the log there, as it would for a torn frame in the clear.
                target.initializeMemory(as: UInt8.self, repeating: 0)
            case IOError.data:
                EncryptingVFS.recordFailure(self, unit.position)
                return IOError.data
            default:
                return code
            }
        }
        return short ? IOError.shortRead : SQLITE_OK
    }

    func write(_ buffer: UnsafeRawBufferPointer, at offset: Int) -> Int32 {
        let range = offset..<(offset + buffer.count)
        let units = units(overlapping: range)
        guard !units.isEmpty else { return rawWrite(buffer, at: offset) }
        let size = EncryptingVFS.pageSize
        // The write as it goes to the file: the clear bytes as given, each unit sealed whole.
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: buffer.count, alignment: 16)
        defer { copy.deallocate() }
        copy.copyMemory(from: buffer)
        let page = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { page.deallocate() }
        var separate: [(CipherUnit, [UInt8])] = []
        for unit in units {
            let whole = unit.start >= range.lowerBound && unit.start + size <= range.upperBound
            if whole {
                let slice = UnsafeMutableRawBufferPointer(
                    rebasing: copy[(unit.start - offset)..<(unit.start - offset + size)])
                do { try cipher.seal(slice, role: role, position: unit.position) } catch { return IOError.write }
                continue
            }
            // Part of a unit: read it, change the part, seal it whole, and write it on its own.
            let code = readUnit(unit, into: page)
            if code == IOError.shortRead {
                page.initializeMemory(as: UInt8.self, repeating: 0)
            } else if code != SQLITE_OK {
                if code == IOError.data { EncryptingVFS.recordFailure(self, unit.position) }
                return code
            }
            let overlap = max(unit.start, range.lowerBound)..<min(unit.start + size, range.upperBound)
            UnsafeMutableRawBufferPointer(
                rebasing: page[(overlap.lowerBound - unit.start)..<(overlap.upperBound - unit.start)]
            )
            .copyMemory(
                from: UnsafeRawBufferPointer(
                    rebasing: buffer[(overlap.lowerBound - offset)..<(overlap.upperBound - offset)]))
            do { try cipher.seal(page, role: role, position: unit.position) } catch { return IOError.write }
            separate.append((unit, Array(page)))
        }
        if separate.isEmpty { return rawWrite(UnsafeRawBufferPointer(copy), at: offset) }
        // The clear parts of the range, then each partly written unit whole.
        var clearStart = offset
        for (unit, _) in separate.sorted(by: { $0.0.start < $1.0.start }) {
            let clearEnd = max(clearStart, unit.start)
            if clearEnd > clearStart {
                let code = rawWrite(
                    UnsafeRawBufferPointer(rebasing: copy[(clearStart - offset)..<(clearEnd - offset)]), at: clearStart)
                if code != SQLITE_OK { return code }
            }
            clearStart = max(clearStart, unit.start + size)
        }
        if clearStart < range.upperBound {
            let code = rawWrite(UnsafeRawBufferPointer(rebasing: copy[(clearStart - offset)...]), at: clearStart)
            if code != SQLITE_OK { return code }
        }
        for (unit, bytes) in separate {
            let code = bytes.withUnsafeBytes { rawWrite($0, at: unit.start) }
            if code != SQLITE_OK { return code }
        }
        return SQLITE_OK
    }
}

/// SQLite's extended I/O result codes (macros C gives Swift no names for).
enum IOError {
    static let shortRead = SQLITE_IOERR | (2 << 8)
    static let read = SQLITE_IOERR | (1 << 8)
    static let write = SQLITE_IOERR | (3 << 8)
    static let fsync = SQLITE_IOERR | (4 << 8)
    static let truncate = SQLITE_IOERR | (6 << 8)
    static let fstat = SQLITE_IOERR | (7 << 8)
    static let unlock = SQLITE_IOERR | (8 << 8)
    static let checkReservedLock = SQLITE_IOERR | (14 << 8)
    static let lock = SQLITE_IOERR | (15 << 8)
    static let shmLock = SQLITE_IOERR | (20 << 8)
    static let shmMap = SQLITE_IOERR | (21 << 8)
    static let data = SQLITE_IOERR | (32 << 8)
}
