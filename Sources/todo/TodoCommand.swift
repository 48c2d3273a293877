import Foundation

// The sample app arrives with issue 5; until then this says so instead of pretending to work.
FileHandle.standardError.write(Data("todo: not built yet; the sample app arrives with issues 4 and 5.\n".utf8))
exit(1)
