// A stand-in for verror (npm is out of reach): an Error with a cause, as the SDK uses it.
var util = require('util');
function VError(cause, message) {
    if (!(this instanceof VError)) { return new VError(cause, message); }
    if (!(cause instanceof Error)) { message = util.format.apply(null, arguments); cause = undefined; }
    else { message = util.format.apply(null, Array.prototype.slice.call(arguments, 1)); }
    this.message = message + (cause ? ': ' + cause.message : '');
    this.cause = function () { return cause; };
    this.name = 'VError';
}
util.inherits(VError, Error);
module.exports = VError;
module.exports.VError = VError;
