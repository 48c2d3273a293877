import Foundation

// The table API arrives with issue 3; until then this says so instead of pretending to serve.
FileHandle.standardError.write(Data("sync-server: not built yet; the table API arrives with issue 3.\n".utf8))
exit(1)
