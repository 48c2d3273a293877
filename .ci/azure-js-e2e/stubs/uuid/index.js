// A stand-in for uuid (npm is out of reach): v4 from Node's crypto.
exports.v4 = function () { return require('crypto').randomUUID(); };
